"""Is the offline extractor linear in a session's messages? (issue 46 #8)

Run from the repository root:

    python bench/offline_long_session.py                 # 1,000 / 5,000 / 20,000 messages
    python bench/offline_long_session.py --sizes 500,1000

One session of ``n`` messages by one speaker (the worst case of the old dialogue scan, which read ahead
per message: 5,000 messages took 4.8 s and 20,000 about 90 s), the real MiniLM embedder, one warm-up
extraction first. Prints the wall time per session, the milliseconds per 1,000 messages, and each
size's time per message against the smallest size's (1.0 = linear).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(ROOT))

from jobs.embeddings import get_embedder  # noqa: E402
from jobs.extract.offline import OfflineExtractor  # noqa: E402
from jobs.models import Message, Transcript  # noqa: E402


def session(n: int) -> Transcript:
    messages = [
        Message(role="user", content=f"Note {i}: we moved the build to runner {i % 7} and it took {i} seconds.")
        for i in range(n)
    ]
    return Transcript(
        id=n,
        tenant_id="bench",
        user_id="u",
        session_id=f"long-{n}",
        purpose="general",
        started_at=None,
        ended_at=dt.datetime(2025, 3, 4, tzinfo=dt.UTC),
        messages=messages,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,5000,20000", help="messages per session, comma-separated")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    extractor = OfflineExtractor(get_embedder("minilm"))
    extractor.extract(session(20))  # warm up: the model loaded, the first call's overhead paid
    print(f"{'messages':>9}  {'seconds':>8}  {'ms / 1k msgs':>12}  {'per message vs first':>20}")
    first: float | None = None
    for n in sizes:
        transcript = session(n)
        started = time.perf_counter()
        extractor.extract(transcript)
        seconds = time.perf_counter() - started
        per_1k = seconds * 1000 / (n / 1000)
        first = first or per_1k
        print(f"{n:>9,}  {seconds:>8.2f}  {per_1k:>12.1f}  {per_1k / first:>20.2f}")


if __name__ == "__main__":
    main()

"""Is redaction linear on the patterns' worst cases? (moved here from a timed assertion in tests/unit)

Run from the repository root:

    python bench/redact_worst_cases.py                   # each case at 75,000 and 300,000 characters
    python bench/redact_worst_cases.py --sizes 10000,40000

Each worst case for the detectors' patterns (long runs of letters, digits, at-signs, dots, colons,
parentheses, PEM headers, dense personal data) is redacted at every size; the bench prints the CPU time
(process time, best of ``--repeat``) per 100,000 characters and each size's time per character against the
smallest size's (1.0 = linear; a quadratic path shows as the size ratio, 4.0 for a size four times larger).
Before the quadratic paths were removed, 300 KB of such input took minutes; a linear pass takes about a second.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(ROOT))

from jobs.pii.redaction import redact  # noqa: E402

UNITS = {  # one repeat of each worst case; the text is the unit repeated up to the size
    "letters": "a",
    "digit-runs": "1 ",
    "at-signs": "a@",
    "dots": "1.",
    "colons": "a:",
    "parens": "(1)",
    "pem-begins": "-----BEGIN RSA PRIVATE KEY-----",
    "dense-pii": "call me +44 20 7946 0958 maria@example.com 4111 1111 1111 1111 ",
}


def case(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def cpu_seconds(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        redact(text, enabled=True)
        best = min(best, time.process_time() - started)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="75000,300000", help="characters per case, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case and size; the best is kept")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'case':<12}  {'characters':>10}  {'CPU s':>7}  {'ms / 100k chars':>15}  {'per char vs first':>17}")
    for name, unit in UNITS.items():
        first: float | None = None
        for size in sizes:
            text = case(unit, size)
            seconds = cpu_seconds(text, args.repeat)
            per_100k = seconds * 1000 / (len(text) / 100_000)
            first = first or per_100k or 1e-9
            print(f"{name:<12}  {len(text):>10,}  {seconds:>7.3f}  {per_100k:>15.1f}  {per_100k / first:>17.2f}")


if __name__ == "__main__":
    main()

"""A snapshot of the offline extractor's output on every transcript of ../shared/data (issue 48), to diff before and
after a change to its rules: identical snapshots mean `episodes eval` sees the same episodes.

Every LoCoMo session, every Claude Code session file's sessions, every sde-bench task chat (the amending chat with
the first chat's decisions and preferences offered, as bench/_coding_quality.py does) and every decoy chat is
extracted; each episode (summary, tags, events, entities, open-item resolutions, lines) is one JSON line.

    python bench/offline_snapshot.py /tmp/before.jsonl
    ... change the rules ...
    python bench/offline_snapshot.py /tmp/after.jsonl --diff /tmp/before.jsonl
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _coding_quality import _chat, session_transcripts  # noqa: E402
from offline_extractor_quality import load_sessions  # noqa: E402

from jobs.extract.lines import episode_lines  # noqa: E402
from jobs.extract.offline import OfflineExtractor  # noqa: E402
from jobs.models import OpenItem, Transcript  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
Case = tuple[str, Transcript, list[OpenItem] | None]


def locomo(data: Path) -> Iterator[Case]:
    for s in load_sessions(data / "locomo"):
        yield f"locomo/{s['conversation']}/{s['session']}", s["transcript"], None


def claude_code(data: Path) -> Iterator[Case]:
    for path in sorted((data / "claude-code").glob("*.jsonl")):
        for transcript in session_transcripts(path, "snap", WHEN):
            yield f"claude-code/{path.name}/{transcript.session_id}", transcript, None


def sde_bench(data: Path, extractor: OfflineExtractor) -> Iterator[Case]:
    root = data / "sde-bench"
    for path in sorted((root / "tasks").glob("*.json")):
        task = json.loads(path.read_text(encoding="utf-8"))
        chats = task["conversations"]
        chats = chats if chats and isinstance(chats[0], list) else [chats]
        offered: list[OpenItem] | None = None
        for j, turns in enumerate(chats):
            transcript = _chat(turns, WHEN + dt.timedelta(days=30 * j), f"chat-{j + 1}")
            yield f"sde-bench/{path.stem}/{j + 1}", transcript, offered
            first = extractor.extract(transcript, offered).extraction.key_events
            offered = [
                OpenItem(k + 1, e.type, e.what, WHEN)
                for k, e in enumerate(first)
                if e.type in ("decision", "preference")
            ]
    decoys = json.loads((root / "decoy_conversations.json").read_text(encoding="utf-8"))
    for k, chat in enumerate(decoys):
        yield f"sde-bench/decoy/{k}", _chat(chat["turns"], WHEN, f"decoy-{k}"), None


def episode(extractor: OfflineExtractor, transcript: Transcript, offered: list[OpenItem] | None) -> dict[str, Any]:
    e = extractor.extract(transcript, offered).extraction
    return {
        "summary": e.summary,
        "tags": list(e.topic_tags),
        "events": [ev.model_dump(mode="json") for ev in e.key_events],
        "entities": [en.model_dump(mode="json") for en in e.entities],
        "resolutions": [r.model_dump(mode="json") for r in e.resolved_items],
        "importance": e.importance,
        "lines": [[ln.message_index, ln.speaker, ln.text] for ln in episode_lines(transcript.messages)],
    }


def snapshot(data: Path, out: Path, per_source: int | None = None) -> int:
    """Write every episode (or the first ``per_source`` of LoCoMo, of the Claude Code files and of sde-bench)."""
    extractor = OfflineExtractor()
    sources = (locomo(data), claude_code(data), sde_bench(data, extractor))
    n = 0
    with out.open("w", encoding="utf-8") as f:
        for key, transcript, offered in itertools.chain.from_iterable(itertools.islice(s, per_source) for s in sources):
            f.write(json.dumps({"key": key, **episode(extractor, transcript, offered)}, sort_keys=True) + "\n")
            n += 1
    return n


def diff(after: Path, before: Path) -> str:
    """Episodes and events that differ between two snapshots."""
    a = {r["key"]: r for r in map(json.loads, after.read_text(encoding="utf-8").splitlines())}
    b = {r["key"]: r for r in map(json.loads, before.read_text(encoding="utf-8").splitlines())}
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    events = sum(
        len(
            {json.dumps(x, sort_keys=True) for x in a.get(k, {}).get("events", [])}
            ^ {json.dumps(x, sort_keys=True) for x in b.get(k, {}).get("events", [])}
        )
        for k in changed
    )
    fields: dict[str, int] = {}
    for k in changed:
        for name in ("summary", "tags", "events", "entities", "resolutions", "importance", "lines"):
            fields[name] = fields.get(name, 0) + (a.get(k, {}).get(name) != b.get(k, {}).get(name))
    head = (
        f"{len(changed)} of {len(a)} episodes differ; {events} events differ (symmetric difference); by field {fields}"
    )
    return "\n".join([head, *changed[:40]])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the snapshot file to write (JSON lines)")
    parser.add_argument("--data", type=Path, default=DATA, help="../shared/data")
    parser.add_argument("--diff", type=Path, help="an earlier snapshot to compare with")
    parser.add_argument("--no-run", action="store_true", help="only diff OUT against --diff")
    parser.add_argument(
        "--per-source", type=int, metavar="N", help="only the first N episodes of each source (a quick check)"
    )
    args = parser.parse_args(argv)
    if not args.no_run:
        print(f"{snapshot(args.data, args.out, args.per_source)} episodes written to {args.out}")
    if args.diff:
        print(diff(args.out, args.diff))


if __name__ == "__main__":
    main()

"""The rule ledger (issue 48): how often each of the offline extractor's rule records fires on data nobody wrote
them for: the five LoCoMo conversations, the Claude Code session files and the 140 sde-bench decoy chats.

Every user and assistant message is split into sentences as the extractor splits them
(:func:`jobs.extract.rules.text.split_sentences` after :func:`jobs.extract.rules.agent.clean_said`); a record
*fires* on a sentence when its pattern alone matches (:meth:`RuleRecord.fires`; an entity rule about the words
before or after a name, when it matches beside one of the sentence's capitalised words); a cue rule *decides* a sentence
when it is the one :func:`jobs.extract.rules.cues.cue` picks (conditions met, no veto, first by priority).

    python bench/rule_ledger.py                      # print the ledger
    python bench/rule_ledger.py --write              # and write reports/rule_ledger.json (committed)

tests/unit/test_rule_ledger.py fails when a rule fires on none of the corpora (only on its own examples), reads the
committed ledger so that CI without ../shared checks it too, and checks the ledger is current when ../shared exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.extract.rules.agent import clean_said  # noqa: E402
from jobs.extract.rules.cues import candidates, surviving  # noqa: E402
from jobs.extract.rules.records import RULE_FILES, load  # noqa: E402
from jobs.extract.rules.text import normalise, split_sentences  # noqa: E402
from jobs.formats.claude_code import read_session_file  # noqa: E402
from jobs.formats.shapes import normalise_messages  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LEDGER = ROOT / "reports" / "rule_ledger.json"


def locomo(data: Path) -> Iterator[str]:
    """Every turn of every session of the LoCoMo conversations."""
    for path in sorted((data / "locomo").glob("*.json")):
        conv = json.loads(path.read_text(encoding="utf-8"))
        for key, turns in conv.items():
            if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                yield from (t["text"] for t in turns if t.get("text"))


def claude_code(data: Path) -> Iterator[str]:
    """The user's and the assistant's messages of the Claude Code session files, as the extractor reads them."""
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for path in sorted((data / "claude-code").glob("*.jsonl")):
        for _, record in read_session_file(
            path, tenant_id="ledger", user_id="ledger", idle_close_seconds=None, now=when, closed=True
        ):
            if isinstance(record, str):
                continue
            try:
                messages = normalise_messages(record["messages"])
            except (ValueError, TypeError):
                continue
            yield from (str(m["content"]) for m in messages if m.get("role") in ("user", "assistant"))


def sde_decoys(data: Path) -> Iterator[str]:
    """Every turn of sde-bench's 140 decoy chats (not the task chats: those were read while tuning)."""
    for chat in json.loads((data / "sde-bench" / "decoy_conversations.json").read_text(encoding="utf-8")):
        yield from (t["text"] for t in chat["turns"] if t.get("text"))


CORPORA = {"locomo": locomo, "claude-code": claude_code, "sde-bench-decoys": sde_decoys}


def pattern_hash(pattern: str) -> str:
    return hashlib.sha256(pattern.encode("utf-8")).hexdigest()[:16]


def ledger(data: Path = DATA) -> dict[str, Any]:
    """Fires (and, for cue rules, decisions) per rule and corpus."""
    records = [r for name in RULE_FILES for r in load(name)]
    fires = {r.id: dict.fromkeys(CORPORA, 0) for r in records}
    decides = {r.id: dict.fromkeys(CORPORA, 0) for r in records}
    sizes: dict[str, int] = {}
    for corpus, read in CORPORA.items():
        n = 0
        for message in read(data):
            for sentence in split_sentences(clean_said(message)):
                text = normalise(sentence)
                n += 1
                for r in records:
                    fires[r.id][corpus] += r.fires(text)
                kept = surviving(candidates(text), text)
                if kept:
                    decides[kept[0].rule][corpus] += 1
        sizes[corpus] = n
    rules = {
        r.id: {
            "type": r.type,
            "pattern_sha256": pattern_hash(r.pattern),
            "fires": fires[r.id],
            "total": sum(fires[r.id].values()),
            **({"decides": decides[r.id]} if r.priority else {}),
        }
        for r in records
    }
    return {
        "command": "python bench/rule_ledger.py --write",
        "corpora": {name: {"sentences": sizes[name], "path": f"../shared/data ({name})"} for name in CORPORA},
        "rules": rules,
    }


def report(result: dict[str, Any]) -> str:
    names = list(result["corpora"])
    sizes = "  ".join(f"{n} {result['corpora'][n]['sentences']}" for n in names)
    lines = [f"Rule ledger: fires per rule (sentences: {sizes})", f"{'rule':28} " + " ".join(f"{n:>17}" for n in names)]
    for rid, row in result["rules"].items():
        cells = " ".join(f"{row['fires'][n]:>17}" for n in names)
        flag = "   <- fires on no corpus" if row["total"] == 0 else ""
        lines.append(f"{rid:28} {cells}{flag}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder holding locomo/, claude-code/, sde-bench/")
    parser.add_argument("--write", action="store_true", help=f"write the ledger to {LEDGER.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    result = ledger(args.data)
    print(report(result))
    if args.write:
        LEDGER.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {LEDGER.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

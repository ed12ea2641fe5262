"""How much of what the offline extractor makes of real coding-agent sessions is junk? (issue 30, deliver 6)

Run from the repository root:

    python bench/agent_session_quality.py            # the figures, then one line per session
    python bench/agent_session_quality.py --show     # also every summary, tag and event
    python bench/agent_session_quality.py --json

Every real Claude Code session file in ``../shared/data/claude-code`` (override with ``--data``; never
copied into the repository) is ingested with the claude-code format into a scratch embedded database,
summarised by the offline extractor through the summarize job, and its stored episodes are judged:

- **narration**: the share of key events that are the assistant's working narration ("Let me check the
  project structure", "I'll run the tests", "Let the assistant check ...", "The assistant will apply
  ...") rather than a decision, commitment, question or surprise. Judged by :func:`is_narration_event`,
  written for this bench from the issue's examples and independent of the extractor's own filter: an
  event is narration when it is the assistant's (``who`` is ``assistant``, or its text starts with
  "The assistant" / "Let the assistant") and its text is a first-person or third-person procedural step
  in the present or future (let me / let's / I'll / I will / I'm going to / now I / next I / the
  assistant will / committed to ...), with no time for later (tomorrow, next week, by Friday, later).
  Goal: at most 10 %.
- **format tags**: topic tags that are format words (:data:`FORMAT_TAGS`: tool, result, user,
  assistant, call, output, json, message, content, command-name, ...; a tag counts when all its words
  are such words). Goal: 0.
- **tool quotes**: summaries that quote tool output as someone's words: a summary holding a tool line
  (``[tool call ...``, ``[tool result ...``), a quoted span ("...", 12+ characters) found in a tool
  message but in no user or assistant message, or a run of 8 words copied from a tool message that no
  user or assistant message holds. Goal: 0. Events whose text does so are counted beside it.
- **events per session**: key events stored per summarised session (fewer is not better in itself:
  the narration share says what the events are).

``--before DIR`` runs the same measurement with the code of another checkout (a git worktree of an
earlier commit), in a subprocess, and prints both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

if TYPE_CHECKING:
    from jobs.db import Database
    from jobs.extract import Extractor

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "claude-code"
TENANT = "bench"
USER = "bench-user"

# -- the bench's own judges (not the extractor's rules) -------------------------------------------

_LATER = re.compile(
    r"\b(?:tomorrow|tonight|later|next (?:week|month|time|session)|by (?:mon|tues|wednes|thurs|fri|"
    r"satur|sun)day|end of (?:the )?(?:day|week))\b",
    re.IGNORECASE,
)
_STEP_VERB = (
    r"(?:check|run|look|read|see|search|find|start|create|add|write|update|fix|apply|draft|research|"
    r"help|implement|examine|inspect|explore|verify|test|try|make|set up|install|open|review|"
    r"investigate|debug|edit|change|modify|use|build|get|go|begin|analy[sz]e|trace|now|first|next|then)"
)
_NARRATION_TEXT = [
    re.compile(r"^\W*let the assistant\b", re.IGNORECASE),
    re.compile(
        r"^\W*the assistant (?:will|is going to|is about to|plans to|needs to|wants to|committed to|"
        r"checks|runs|reads|looks|starts|begins)\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"^\W*the assistant (?:said|committed|decided|was surprised)\W+\"\W*(?:(?:\w+)[,!.:]\s+)*"
        r"(?:let me|let's|i'll|i will|i'm going to|i am going to|i need to|i'm|now,? (?:i|let)|"
        r"next,? (?:i|let)|first,? (?:i|let)|then,? (?:i|let))\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"^\W*(?:(?:\w+)[,!.:]\s+)*(?:let me|let's|i'll|i will|i'm going to|now,? i|next,? i)\s+" + _STEP_VERB + r"\b",
        re.IGNORECASE,
    ),
]
FORMAT_TAGS = frozenset(
    "tool tools result results user users assistant assistants call calls output outputs json jsonl message messages "
    "content input inputs system stdout stderr tool_use tool_result command-name command-message command-args "
    "request interrupted response role".split()
)
_TOOL_LINE = re.compile(r"\[tool[ _](?:call|result|error|use)\b|\[tool_result\b", re.IGNORECASE)
_QUOTE = re.compile(r"\"([^\"]{12,})\"|“([^”]{12,})”")


def is_narration_event(event: dict[str, Any]) -> bool:
    """Is this key event the assistant's working narration (see the module docstring)?"""
    what = event["what"]
    by_assistant = (event.get("who") or "").strip().lower() == "assistant" or re.match(
        r"^\W*(?:let )?the assistant\b", what, re.IGNORECASE
    )
    if not by_assistant or _LATER.search(what):
        return False
    return any(p.search(what) for p in _NARRATION_TEXT)


def is_format_tag(tag: str) -> bool:
    words = tag.lower().split()
    return bool(words) and all(w in FORMAT_TAGS for w in words)


def _squash(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def quotes_tool_output(text: str, messages: list[dict[str, Any]]) -> bool:
    """Does ``text`` (a summary or an event) present tool output as someone's words?"""
    if _TOOL_LINE.search(text):
        return True
    tool = [_squash(m["content"]) for m in messages if m.get("role") == "tool"]
    said = [_squash(m["content"]) for m in messages if m.get("role") != "tool"]
    if not tool:
        return False
    for m in _QUOTE.finditer(text):
        span = _squash(m.group(1) or m.group(2))
        if span and any(span in t for t in tool) and not any(span in s for s in said):
            return True
    words = _squash(text).split()
    for k in range(len(words) - 7):
        run = " ".join(words[k : k + 8])
        if any(run in t for t in tool) and not any(run in s for s in said):
            return True
    return False


# -- the measurement -------------------------------------------------------------------------------


@dataclass
class Figures:
    files: int = 0
    sessions: int = 0  # transcripts ingested
    summarised: int = 0
    rejected_lines: int = 0
    events: int = 0
    narration_events: int = 0
    tags: int = 0
    format_tags: int = 0
    tool_quote_summaries: int = 0
    tool_quote_events: int = 0
    extractor: str = ""
    per_session: list[dict[str, Any]] = field(default_factory=list)

    @property
    def narration_share(self) -> float:
        return self.narration_events / self.events if self.events else 0.0

    @property
    def events_per_session(self) -> float:
        return self.events / self.summarised if self.summarised else 0.0


def measure(db: Database, paths: list[Path], extractor: Extractor) -> Figures:
    """Ingest ``paths`` (Claude Code session files) into ``db``, summarise them with ``extractor`` and
    judge the stored episodes."""
    from jobs.ingest import ingest
    from jobs.summarize import run_summarize

    report = ingest(db, paths, fmt="claude-code", tenant_id=TENANT, user_id=USER)
    run_summarize(db, extractor=extractor, tenant=TENANT)
    figures = Figures(
        files=len(paths),
        sessions=report.loaded,
        rejected_lines=len(report.rejected),
        extractor=f"{extractor.name} {extractor.prompt_version}",
    )
    with db.admin() as conn:
        rows = conn.execute(
            "SELECT e.id, t.session_id, t.messages, t.source, e.summary, e.topic_tags "
            "FROM episodes e JOIN transcripts t ON t.tenant_id = e.tenant_id AND t.session_id = e.session_id "
            "WHERE e.tenant_id = %s AND e.kind = 'session' AND e.status = 'current' ORDER BY t.session_id",
            (TENANT,),
        ).fetchall()
        for row in rows:
            events = conn.execute(
                "SELECT type, what, who, evidence, evidence_quote FROM episode_events "
                "WHERE tenant_id = %s AND episode_id = %s ORDER BY ordinal",
                (TENANT, row["id"]),
            ).fetchall()
            messages = row["messages"]
            narration = [e for e in events if is_narration_event(e)]
            bad_tags = [t for t in row["topic_tags"] if is_format_tag(t)]
            quote = quotes_tool_output(row["summary"], messages)
            event_quotes = [e for e in events if quotes_tool_output(e["what"], messages)]
            figures.summarised += 1
            figures.events += len(events)
            figures.narration_events += len(narration)
            figures.tags += len(row["topic_tags"])
            figures.format_tags += len(bad_tags)
            figures.tool_quote_summaries += int(quote)
            figures.tool_quote_events += len(event_quotes)
            figures.per_session.append(
                {
                    "session": row["session_id"],
                    "messages": len(messages),
                    "summary": row["summary"],
                    "tags": list(row["topic_tags"]),
                    "format_tags": bad_tags,
                    "quotes_tool_output": quote,
                    "events": [
                        {"type": e["type"], "who": e["who"], "what": e["what"], "narration": e in narration}
                        for e in events
                    ],
                }
            )
    return figures


def run(data: Path, limit: int | None) -> Figures:
    from _common import scratch_database

    from jobs.embeddings import get_embedder
    from jobs.extract.offline import OfflineExtractor

    paths = sorted(data.glob("*.jsonl"))[:limit]
    if not paths:
        raise SystemExit(f"no Claude Code session files (*.jsonl) in {data}")
    with scratch_database(extractor="offline") as db:
        return measure(db, paths, OfflineExtractor(get_embedder("minilm")))


def _as_dict(figures: Figures) -> dict[str, Any]:
    out = asdict(figures)
    out["narration_share"] = round(figures.narration_share, 4)
    out["events_per_session"] = round(figures.events_per_session, 2)
    return out


def headline(f: dict[str, Any]) -> str:
    return (
        f"{f['extractor']}: {f['files']} files, {f['sessions']} records ingested ({f['rejected_lines']} bad lines "
        f"reported), {f['summarised']} sessions summarised; narration {f['narration_events']}/{f['events']} events "
        f"= {f['narration_share'] * 100:.1f} % (goal <= 10 %); format-word tags {f['format_tags']}/{f['tags']} "
        f"(goal 0); summaries quoting tool output {f['tool_quote_summaries']} (goal 0; events: "
        f"{f['tool_quote_events']}); events per session {f['events_per_session']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=None, help="at most this many files (a smoke run)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show", action="store_true", help="print every summary, tag and event")
    parser.add_argument("--before", type=Path, help="also measure the code of this checkout (a git worktree)")
    args = parser.parse_args()
    if not args.data.is_dir():
        raise SystemExit(f"{args.data} is not a directory: pass --data with the Claude Code session files")
    results: list[tuple[str, dict[str, Any]]] = []
    if args.before:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--json", "--data", str(args.data.resolve())]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        env = {**os.environ, "EPISODES_BENCH_ROOT": str(args.before.resolve())}
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        results.append(("before", json.loads(out)))
    results.append(("now" if args.before else "", _as_dict(run(args.data, args.limit))))
    if args.json:
        print(json.dumps(results[-1][1] if not args.before else dict(results), indent=1, default=str))
        return
    for label, figures in results:
        print((f"{label:>6}  " if label else "") + headline(figures))
    for label, figures in results:
        print(f"\n{label or 'sessions'}:" if args.show or args.before else "\nsessions:")
        for s in figures["per_session"]:
            narr = sum(e["narration"] for e in s["events"])
            print(
                f"  {s['session'][:36]:36} {s['messages']:4} msgs  {len(s['events'])} events ({narr} narration)  "
                f"tags {s['tags']}{'  QUOTES TOOL OUTPUT' if s['quotes_tool_output'] else ''}"
            )
            if args.show:
                print(f"      summary: {s['summary']}")
                for e in s["events"]:
                    print(f"      {'N ' if e['narration'] else '  '}{e['type']} ({e['who']}): {e['what']}")


if __name__ == "__main__":
    if os.environ.get("EPISODES_BENCH_ROOT"):  # --before: import jobs from the other checkout
        sys.path.insert(0, os.environ["EPISODES_BENCH_ROOT"])
    main()

"""The offline extractor on coding sessions (``python bench/offline_extractor_quality.py --coding``), issue 36.

Two data sets beside the repository, read, never copied:

- ``../shared/data/claude-code``: real Claude Code session files. Each session is read with the claude-code
  format, normalised to canonical messages and extracted offline (no database: the extractor alone). Two of
  them are the set the rules were developed on (:data:`TUNING`), reported apart from the rest; the rest
  were read too while choosing (everything in ../shared/data was, issue 47), so all of it is tuning data. Per session: events by type, topics (and those made only of the words the issue found as
  topics: add, update, read, tests, task, write, fix, file), and
  - **narration**: events that are the assistant's working narration, judged by
    ``bench/agent_session_quality.py``'s :func:`is_narration_event` (written for that bench from the issue's
    examples, independent of the extractor's filter): the assistant's event (``who`` is ``assistant`` or the
    text starts with "The assistant" / "Let the assistant") whose text is a procedural step in the present or
    future (let me / let's / I'll / I'm going to / now I / the assistant will ...) with no time for later.
    Goal: at most 10 % of events.
  - **quoted as the user**: an event the user is credited with (``who`` is ``user``) or a summary sentence
    starting "The user" that holds 8 consecutive words found in text that is not the user's -- a compaction
    summary (``isCompactSummary`` lines, "This session is being continued ..."), hook output (``attachment``
    lines, ``<...-hook>`` blocks, "... hook feedback:"), or a tool result -- and in nothing the user typed.
    Goal: 0.
- ``../shared/data/sde-bench/tasks``: each task's chat settles one rule (``policy`` in the task). Per task:
  whether the extractor made a decision event, and the share of the policy's content words (4+ letters, or
  any number) that the best-covering decision event holds verbatim ("specifics"). For the 6 amended tasks the
  second chat is extracted with the first chat's decisions offered as open items, and the bench counts the
  tasks where a decision of the second chat ``replaces`` one of the first (later wins). Aggregates over both
  halves (both read while choosing: tuning data); the bench prints no chat text.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_session_quality import is_format_tag, is_narration_event

from jobs.extract.offline import OfflineExtractor
from jobs.formats.claude_code import read_session_file
from jobs.formats.shapes import normalise_messages
from jobs.models import KeyEvent, Message, OpenItem, Transcript

# The words issue 36 found as whole topics of real sessions: a topic made only of these names no subject.
ISSUE_WORDS = frozenset("add update read tests task write fix file".split())
TUNING = ("claude-code-log-representative_messages.jsonl", "spotter-tool-heavy.jsonl")
WHEN = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)
_HOOK_BLOCK = re.compile(r"<([a-z-]*hook[a-z-]*)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_COMPACTED = "this session is being continued from a previous conversation"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _runs(text: str, n: int = 8) -> set[str]:
    w = _words(text)
    return {" ".join(w[k : k + n]) for k in range(len(w) - n + 1)}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text(b.get("text") or b.get("content") or "") if isinstance(b, dict) else str(b) for b in content
        )
    return ""


def not_the_users(path: Path) -> tuple[str, str]:
    """(text that is not the user's: compaction summaries, hook output, tool results; what the user typed)."""
    foreign, typed = [], []
    for raw in path.read_text(errors="replace").splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(line, dict):
            continue
        if line.get("type") == "attachment":
            foreign.append(json.dumps(line.get("attachment"), ensure_ascii=False))
            continue
        message = line.get("message")
        if line.get("type") != "user" or not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                foreign.append(_text(block.get("content")))
                continue
            text = _text(block.get("text"))
            hooks = [m.group(2) for m in _HOOK_BLOCK.finditer(text)]
            foreign.extend(hooks)
            if (
                line.get("isCompactSummary")
                or text.lower().lstrip().startswith(_COMPACTED)
                or re.match(r"\s*\w+ hook (?:feedback|error|output)", text, re.IGNORECASE)
            ):
                foreign.append(text)
            else:
                typed.append(_HOOK_BLOCK.sub(" ", text))
    return "\n".join(foreign), "\n".join(typed)


def _quotes_foreign(text: str, foreign: set[str], typed: set[str]) -> bool:
    return bool((_runs(text) & foreign) - typed)


def session_transcripts(path: Path, who: str, now: dt.datetime) -> Iterator[Transcript]:
    """Every closed session of a Claude Code session file as a transcript of user ``who`` (a session whose messages
    do not validate is left out)."""
    for _, record in read_session_file(path, tenant_id=who, user_id=who, idle_close_seconds=None, now=now, closed=True):
        if isinstance(record, str):
            continue
        try:
            messages = [Message(**m) for m in normalise_messages(record["messages"])]
        except (ValueError, TypeError):
            continue
        yield Transcript(
            id=1,
            tenant_id=who,
            user_id=who,
            session_id=str(record["session_id"]),
            purpose="general",
            started_at=None,
            ended_at=now,
            messages=messages,
        )


def claude_code(data: Path, limit: int | None, extractor: OfflineExtractor) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(data.glob("*.jsonl"))[:limit]:
        foreign_text, typed_text = not_the_users(path)
        foreign, typed = _runs(foreign_text), _runs(typed_text)
        for transcript in session_transcripts(path, "bench", WHEN):
            messages = transcript.messages
            episode = extractor.extract(transcript).extraction
            events = [e.model_dump() for e in episode.key_events]
            user_sentences = [s for s in re.split(r"(?<=[.!?\"])\s+", episode.summary) if s.startswith("The user")]
            as_user = [
                e
                for e in events
                if (e.get("who") or "").lower() == "user" and _quotes_foreign(e["what"], foreign, typed)
            ]
            as_user += [{"what": s} for s in user_sentences if _quotes_foreign(s, foreign, typed)]
            rows.append(
                {
                    "file": path.name,
                    "set": "rules written on" if path.name in TUNING else "the others (read too)",
                    "session": transcript.session_id,
                    "messages": len(messages),
                    "types": dict(Counter(e["type"] for e in events)),
                    "events": len(events),
                    "narration": sum(is_narration_event(e) for e in events),
                    "tags": list(episode.topic_tags),
                    "format_tags": [t for t in episode.topic_tags if is_format_tag(t)],
                    "verb_tags": [t for t in episode.topic_tags if set(t.split()) <= ISSUE_WORDS],
                    "quoted_as_user": len(as_user),
                    "summary": episode.summary,
                    "event_texts": [f"{e['type']} ({e['who']}): {e['what']}" for e in events],
                }
            )
    return rows


def _policy_words(policy: str) -> set[str]:
    return {w for w in _words(policy) if len(w) >= 4 or w.isdigit()}


def _chat(turns: list[dict[str, Any]], when: dt.datetime, session: str) -> Transcript:
    messages = [
        Message(role="assistant" if t.get("role") == "assistant" else "user", content=t["text"])
        for t in turns
        if str(t.get("text") or "").strip()
    ]
    return Transcript(
        id=1,
        tenant_id="bench",
        user_id="bench",
        session_id=session,
        purpose="general",
        started_at=None,
        ended_at=when,
        messages=messages,
    )


def _coverage(decisions: list[KeyEvent], policy: str) -> float:
    want = _policy_words(policy)
    if not want or not decisions:
        return 0.0
    return max(len(want & set(_words(e.what))) / len(want) for e in decisions)


def sde_bench(data: Path, limit: int | None, extractor: OfflineExtractor) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((data / "tasks").glob("*.json"))[:limit]:
        task = json.loads(path.read_text())
        chats = task["conversations"]
        chats = chats if chats and isinstance(chats[0], list) else [chats]
        first = extractor.extract(_chat(chats[0], WHEN, "first")).extraction.key_events
        row: dict[str, Any] = {"task": path.stem, "amended": len(chats) > 1}
        if len(chats) > 1:
            offered = [
                OpenItem(k + 1, e.type, e.what, WHEN)
                for k, e in enumerate(first)
                if e.type in ("decision", "preference")
            ]
            later = extractor.extract(_chat(chats[1], WHEN + dt.timedelta(days=30), "second"), offered)
            events = later.extraction.key_events
            row["replaces"] = any(e.replaces is not None for e in events)
        else:
            events = first
        decisions = [e for e in events if e.type == "decision"]
        row.update(
            decisions=len(decisions),
            events=len(events),
            types=dict(Counter(e.type for e in events)),
            coverage=round(_coverage(decisions, task["policy"]), 3),
        )
        rows.append(row)
    return rows


def run(claude_code_data: Path, sde_data: Path, limit: int | None = None) -> dict[str, Any]:
    extractor = OfflineExtractor()
    out: dict[str, Any] = {"extractor": f"{extractor.name}/{extractor.prompt_version}"}
    out["claude_code"] = claude_code(claude_code_data, limit, extractor) if claude_code_data.is_dir() else []
    out["sde_bench"] = sde_bench(sde_data, limit, extractor) if (sde_data / "tasks").is_dir() else []
    return out


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:.1f} %" if whole else f"{part}/0"


def report(result: dict[str, Any], show: bool = False) -> str:
    lines = [
        f"Offline extractor ({result['extractor']}) on coding sessions; see bench/_coding_quality.py for "
        "what each figure means."
    ]
    rows = result["claude_code"]
    for which in ("rules written on", "the others (read too)"):
        part = [r for r in rows if r["set"] == which]
        if not part:
            continue
        events = sum(r["events"] for r in part)
        types = sum((Counter(r["types"]) for r in part), Counter())
        lines += [
            "",
            f"Claude Code sessions, {which} ({len(part)} sessions in {len({r['file'] for r in part})} files):",
            f"  events per session {events / len(part):.2f}, by type {json.dumps(dict(sorted(types.items())))}",
            f"  narration {_share(sum(r['narration'] for r in part), events)} of events (goal <= 10 %)",
            f"  format-word topics {sum(len(r['format_tags']) for r in part)}; topics that are only "
            f"{'/'.join(sorted(ISSUE_WORDS))}: {sum(len(r['verb_tags']) for r in part)} (goal 0); "
            f"topics per session {statistics.fmean(len(r['tags']) for r in part):.1f}",
            f"  events or summary sentences quoting a compaction summary, hook or tool output as the user: "
            f"{sum(r['quoted_as_user'] for r in part)} (goal 0)",
        ]
        for r in part:
            lines.append(
                f"  {r['file'][:44]:44} {r['messages']:4} msgs {r['events']:3} events "
                f"{json.dumps(r['types'])} narration {r['narration']}  topics {r['tags']}"
            )
            if show and which == "rules written on":
                lines.append(f"      summary: {r['summary']}")
                lines += [f"      {t}" for t in r["event_texts"]]
    tasks = result["sde_bench"]
    if tasks:
        for amended in (False, True):
            part = [t for t in tasks if t["amended"] is amended]
            if not part:
                continue
            with_decision = sum(t["decisions"] > 0 for t in part)
            lines += [
                "",
                f"sde-bench {'amended' if amended else 'single-chat'} tasks ({len(part)}, both halves; "
                f"{'the second chat' if amended else 'the chat'} extracted):",
                f"  a decision event: {_share(with_decision, len(part))}; events per chat "
                f"{statistics.fmean(t['events'] for t in part):.1f}, decisions per chat "
                f"{statistics.fmean(t['decisions'] for t in part):.1f}",
                f"  policy words held by the best decision event: mean "
                f"{statistics.fmean(t['coverage'] for t in part):.2f}, "
                f"tasks with >= half {sum(t['coverage'] >= 0.5 for t in part)}/{len(part)}",
            ]
            if amended:
                lines.append(
                    f"  a decision of the amending chat replaces one of the first: "
                    f"{sum(bool(t.get('replaces')) for t in part)}/{len(part)}"
                )
    return "\n".join(lines)

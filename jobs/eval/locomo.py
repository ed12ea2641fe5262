"""`episodes eval locomo`: how well recall finds the sessions that answer LoCoMo questions.

The conversations are loaded into a scratch database on the same server (``episodes_eval_<pid>``,
migrated, dropped at the end), so the evaluated database is never touched. Episodes are built by:

- ``oracle``: the reference ``session_N_summary`` is the summary and ``events_session_N`` the key
  events (typed ``decision``: LoCoMo's life events fit none of our types better, and only
  open questions / commitments change recall), importance 0.5, no tags or entities — a stand-in for
  a good model's output, so recall is measured apart from extraction;
- ``offline`` / ``anthropic``: the sessions are ingested as transcripts and the summarize job runs
  with that extractor, end to end.

Then every question of categories 1-4 is recalled with the question as the opening message, as of
one minute after the conversation's last session, with the production defaults. A question counts
for *all-evidence recall* when every session its evidence names has its episode in the block
(rendered in full or compactly), for *strict* all-evidence recall when each is shown in full (not
only as a compact line; the same figure as ``all_evidence_recall_full_text``), for *any-evidence
recall* when at least one has, and for *answer coverage* when every content word of its reference
answer is a word of the block (:mod:`jobs.eval.answers`; questions whose answer has none are left
out of that share). *Foreign questions* measure silence: each user is also asked every question of
the other conversations, whose evidence is by construction nowhere in this user's history; the
report gives the share of those blocks with any episode labelled relevant and the mean tokens spent
on relevant episodes in them. Block tokens are
characters / 4. Evidence ids are ``D<session>:<turn>``; malformed ones (``D:11:26``, ``D``...) are
skipped and counted, and a question left with no usable evidence is left out and counted.
Baselines: the last 8 episodes (no budget), the top 8 by vector (no budget; DESIGN.md's yardstick),
and the vector ranking cut to the same token budget.

Answer coverage is set beside the two *raw-message baselines* (:mod:`jobs.eval.baseline`: every user
and assistant message of the user's transcripts embedded with the same embedder, the closest to the
question filling the same budget, without dates and each led by its session's date) and the ratio
of the block to the better of the two (:class:`jobs.eval.tally.Coverage`), overall, per category and
per conversation, at every budget asked for (:func:`evaluate_budgets`). The extracted paths read the messages the summarize job read; the
oracle path ingests the same sessions as transcripts under a tenant of their own
(``locomo-raw``), which recall never reads, so the oracle's blocks stay free of transcripts.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.config import Settings
from jobs.db import Database
from jobs.embeddings import Embedder, embedder_for
from jobs.embeddings.protocol import Vectors, embed_queries
from jobs.errors import EpisodesError
from jobs.eval.answers import content_words
from jobs.eval.baseline import MessageIndex
from jobs.eval.compression import compare, compress_histories, compressed_sources
from jobs.eval.locomo_data import Conversation, Question, Session
from jobs.eval.locomo_tally import ForeignTally, Tally
from jobs.eval.provenance import data_status
from jobs.eval.scratch import scratch_database
from jobs.formats.locomo import parse_locomo_time
from jobs.models import EpisodeExtraction, KeyEvent, search_text
from jobs.recall import Recall, RecallConfig, Recaller
from jobs.store import EpisodeLine, EpisodeRow, insert_episode

TENANT = "locomo"
RAW_TENANT = "locomo-raw"  # the oracle path's transcripts, read by the raw-message baseline only
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D(\d+):(\d+)$")
_SESSION_ID = re.compile(r"-s(\d+)$")


def load_conversation(path: Path) -> Conversation:
    """Sessions with turns and a parseable time, and the questions of categories 1-4."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "speaker_a" not in data or "qa" not in data:
        raise EpisodesError(f"{path} is not a LoCoMo conversation file (no speaker_a / qa).")
    sessions: dict[int, Session] = {}
    for key in data:
        match = _SESSION.match(key)
        if not match or not data[key]:
            continue
        n = int(match.group(1))
        try:
            when = parse_locomo_time(str(data.get(f"session_{n}_date_time", "")))
        except ValueError:
            continue
        raw_events = data.get(f"events_session_{n}") or {}
        events = [
            (speaker, str(e))
            for speaker, items in raw_events.items()
            if speaker != "date"
            for e in (items if isinstance(items, list) else [])
            if str(e).strip()
        ]
        summary = str(data.get(f"session_{n}_summary") or "").strip()
        sessions[n] = Session(n, when, summary, events)
    conv = Conversation(path, sessions, [])
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        found: set[int] = set()
        # "D8:6; D9:17" holds two ids; "D:11:26" or "D10:" none that can be trusted.
        for ev in (part for raw in qa.get("evidence") or [] for part in re.split(r"[;,\s]+", str(raw)) if part):
            match = _EVIDENCE.match(ev)
            if match is None or int(match.group(1)) not in sessions:
                conv.malformed_evidence += 1
                continue
            found.add(int(match.group(1)))
        if found:
            conv.questions.append(
                Question(
                    str(qa["question"]), int(qa["category"]), frozenset(found), content_words(str(qa.get("answer", "")))
                )
            )
        else:
            conv.unusable_questions += 1
    return conv


def oracle_extraction(s: Session) -> EpisodeExtraction:
    """The oracle's episode of one session: its reference summary and events (module docstring)."""
    # model_construct: reference summaries run longer than the extraction schema allows;
    # the database's own checks still apply.
    return EpisodeExtraction.model_construct(
        summary=s.summary or f"Session {s.number}.",
        topic_tags=[],
        entities=[],
        importance=0.5,
        key_events=[
            KeyEvent.model_construct(type="decision", what=what, evidence=[0], who=who, due=None)
            for who, what in s.events
        ],
    )


def session_lines(path: Path) -> dict[str, list[EpisodeLine]]:
    """The lines each session of a conversation file keeps (:func:`jobs.extract.lines.episode_lines`, as the summarize
    job keeps them), by session id: verbatim transcript lines, not extractor output, so the oracle's episodes quote
    what was said as every extracted episode does, and recall is measured apart from extraction."""
    from jobs.extract.lines import episode_lines
    from jobs.formats.locomo import read_locomo
    from jobs.models import TranscriptIn

    found: dict[str, list[EpisodeLine]] = {}
    for _where, record in read_locomo(path, TENANT):
        if isinstance(record, dict):
            transcript = TranscriptIn.model_validate(record)
            found[str(record["session_id"])] = episode_lines(transcript.messages)
    return found


def build_oracle(db: Database, conversations: Sequence[Conversation], embedder: Embedder) -> int:
    """Insert one episode per session from the reference summary and events, with the session's lines; return
    the count."""
    rows: list[EpisodeRow] = []
    for conv in conversations:
        lines = session_lines(conv.path)
        for n in sorted(conv.sessions):
            s = conv.sessions[n]
            said = lines.get(f"{conv.path.stem}-s{n}", [])
            rows.append(
                EpisodeRow(
                    tenant_id=TENANT,
                    user_id=conv.user_id,
                    kind="session",
                    episode=oracle_extraction(s),
                    started_at=s.when,
                    ended_at=s.when,
                    model="oracle",
                    prompt_version="locomo-reference",
                    embedding=None,
                    session_id=f"{conv.path.stem}-s{n}",
                    lines=said,
                )
            )
    vectors = embedder.embed([search_text(r.episode) for r in rows])
    with db.tenant(TENANT) as conn:
        for row, vector in zip(rows, vectors):
            said_vectors = embedder.embed([line.text for line in row.lines]) if row.lines else None
            insert_episode(conn, replace(row, embedding=vector, line_vectors=said_vectors))
    return len(rows)


def build_extracted(db: Database, paths: Sequence[Path], extractor_name: str) -> int:
    """Ingest the conversations as transcripts and summarise them with a real extractor.

    Returns the number of episodes written. A session the job could not summarise has no episode
    and counts as a miss (the report shows episodes next to sessions).
    """
    from jobs.extract import make_extractor
    from jobs.ingest import ingest
    from jobs.summarize import run_summarize

    ingest(db, list(paths), fmt="locomo", tenant_id=TENANT)
    extractor = make_extractor(db.settings, extractor_name)
    try:  # one worker keeps the offline run deterministic (episode ids break score ties)
        run = run_summarize(db, extractor=extractor, tenant=TENANT, concurrency=1 if extractor_name == "offline" else 4)
    finally:
        extractor.close()
    return run.done


def ingest_raw(db: Database, paths: Sequence[Path]) -> None:
    """The oracle path's transcripts for the raw-message baseline, in a tenant recall never reads."""
    from jobs.ingest import ingest

    ingest(db, list(paths), fmt="locomo", tenant_id=RAW_TENANT)


def _sessions(episodes: Sequence[Any], sources: Mapping[int, list[str]] | None = None) -> set[int]:
    """The session numbers of the episodes shown; a super stands for the sessions compressed into it."""
    ids = [ep.session_id for ep in episodes if ep.session_id]
    ids += [sid for ep in episodes if sources and ep.id in sources for sid in sources[ep.id]]
    return {int(m.group(1)) for sid in ids if (m := _SESSION_ID.search(sid))}


def _fit_prefix(result: Recall, budget: int) -> Recall:
    """The longest prefix, in vector order, of ``result``'s episodes whose block fits ``budget``."""
    ranked = sorted(result.episodes, key=lambda ep: ep.vector_rank or 1 << 30)
    best = replace(result, episodes=[], budget_tokens=budget)
    for k in range(1, len(ranked) + 1):
        trial = replace(best, episodes=sorted(ranked[:k], key=lambda ep: ep.ended_at))
        if not trial.render():
            break
        best = trial
    return best


# Episodes ranked by their own scores, without the relevance floor (relevant_similarity=-1) and without lines
# (max_lines=0: recall's line search would bring in other episodes, and the names would no longer say what they rank).
BASELINES: dict[str, RecallConfig] = {
    "last_8": RecallConfig(recent_n=8, recent_full=True, top_k=0, max_open_items=0, dedup_similarity=2.0, max_lines=0),
    "vector_top_8": RecallConfig(
        recent_n=0,
        top_k=8,
        w_text=0.0,
        decay_floor=1.0,
        w_importance=0.0,
        max_open_items=0,
        dedup_similarity=2.0,
        relevant_similarity=-1.0,
        max_lines=0,
    ),
    "vector_within_budget": RecallConfig(
        recent_n=0,
        top_k=40,
        w_text=0.0,
        decay_floor=1.0,
        w_importance=0.0,
        max_open_items=0,
        dedup_similarity=2.0,
        relevant_similarity=-1.0,
        max_lines=0,
    ),
}
_UNBOUNDED = 1_000_000


def evaluate(
    db: Database,
    conversations: Sequence[Conversation],
    embedder: Embedder,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    config: RecallConfig | None = None,
    raw_tenant: str = TENANT,
) -> dict[str, Any]:
    """Recall every question with the production defaults (or ``config``) and the baselines at one budget.

    The raw-message baselines read the user's transcripts in ``raw_tenant`` (see the module docstring).
    """
    return evaluate_budgets(db, conversations, embedder, [budget_tokens], config=config, raw_tenant=raw_tenant)


def evaluate_budgets(
    db: Database,
    conversations: Sequence[Conversation],
    embedder: Embedder,
    budgets: Sequence[int],
    *,
    config: RecallConfig | None = None,
    raw_tenant: str = TENANT,
    sources: Mapping[int, list[str]] | None = None,
) -> dict[str, Any]:
    """:func:`evaluate` at each budget, the questions and raw messages embedded once; ``sources``: the sessions
    each super stands for (:func:`jobs.eval.compression.compressed_sources`).

    The report is the first budget's, with ``by_budget`` holding every budget's report (its key the budget).
    """
    raw = MessageIndex(db, embedder)
    vectors = {id(conv): embed_queries(embedder, [q.text for q in conv.questions]) for conv in conversations}
    reports = {
        str(b): _evaluate_at(
            db, conversations, embedder, vectors, raw, b, config=config, raw_tenant=raw_tenant, sources=sources
        )
        for b in budgets
    }
    return {**reports[str(budgets[0])], "budgets": list(budgets), "by_budget": reports}


def _evaluate_at(
    db: Database,
    conversations: Sequence[Conversation],
    embedder: Embedder,
    vectors: dict[int, Vectors],
    raw: MessageIndex,
    budget_tokens: int,
    *,
    config: RecallConfig | None,
    raw_tenant: str,
    sources: Mapping[int, list[str]] | None = None,
) -> dict[str, Any]:
    main = Recaller(db, embedder, config)
    baselines = {name: Recaller(db, embedder, cfg) for name, cfg in BASELINES.items()}
    tallies: dict[str, dict[int | str, Tally]] = {"main": {}, **{name: {} for name in baselines}}
    foreign = ForeignTally()
    for conv in conversations:
        for other in conversations:  # every question of the other conversations, asked of this user
            if other is conv:
                continue
            for q, vec in zip(other.questions, vectors[id(other)]):
                foreign.add(
                    main.recall_vector(TENANT, conv.user_id, q.text, vec, budget_tokens=budget_tokens, now=conv.now)
                )
        for q, vec in zip(conv.questions, vectors[id(conv)]):
            undated, dated = raw.blocks(raw_tenant, conv.user_id, vec, budget_tokens)
            results: dict[str, Recall] = {
                "main": main.recall_vector(
                    TENANT, conv.user_id, q.text, vec, budget_tokens=budget_tokens, now=conv.now
                ),
            }
            for name, recaller in baselines.items():
                result = recaller.recall_vector(
                    TENANT, conv.user_id, q.text, vec, budget_tokens=_UNBOUNDED, now=conv.now
                )
                results[name] = _fit_prefix(result, budget_tokens) if name == "vector_within_budget" else result
            for name, result in results.items():
                shown = _sessions(result.episodes, sources)
                full = _sessions([ep for ep in result.episodes if not ep.compact], sources)
                block = result.render()
                for key in ("all", q.category, conv.user_id):
                    tallies[name].setdefault(key, Tally()).add(q, shown, full, block, undated, dated)
    overall = tallies["main"]["all"].summary()
    return {
        **overall,
        **foreign.summary(),
        "per_category": {
            str(c): {"name": CATEGORY_NAMES[c], **tallies["main"][c].summary()}
            for c in CATEGORIES
            if c in tallies["main"]
        },
        "per_conversation": {
            conv.path.stem: tallies["main"][conv.user_id].summary()
            for conv in conversations
            if conv.user_id in tallies["main"]
        },
        "baselines": {
            name: {
                **tallies[name]["all"].summary(),
                "per_category": {str(c): tallies[name][c].summary() for c in CATEGORIES if c in tallies[name]},
            }
            for name in baselines
        },
        "budget_tokens": budget_tokens,
        "conversations": len(conversations),
        "malformed_evidence_ids": sum(c.malformed_evidence for c in conversations),
        "questions_without_usable_evidence": sum(c.unusable_questions for c in conversations),
    }


def run_eval(
    settings: Settings,
    paths: Sequence[Path],
    *,
    extractor: str = "oracle",
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    budgets: Sequence[int] | None = None,
    config: RecallConfig | None = None,
    compress: bool = False,
) -> dict[str, Any]:
    """Load, build episodes, evaluate at each of ``budgets`` (or ``budget_tokens``), drop the scratch database.

    ``compress``: then compress the histories and evaluate again (:mod:`jobs.eval.compression`); the report's
    ``compression`` sets the two side by side."""
    started = time.perf_counter()
    files = _files(paths)
    conversations = [load_conversation(p) for p in files]
    if not conversations:
        raise EpisodesError("No LoCoMo files found; pass .json files or a directory holding them.")
    embedder = embedder_for(settings)
    with scratch_database(settings, embedder) as db:
        if extractor == "oracle":
            episodes = build_oracle(db, conversations, embedder)
            ingest_raw(db, [c.path for c in conversations])
        else:
            episodes = build_extracted(db, [c.path for c in conversations], extractor)
        chosen = list(budgets or [budget_tokens])
        raw_tenant = RAW_TENANT if extractor == "oracle" else TENANT
        report = evaluate_budgets(db, conversations, embedder, chosen, config=config, raw_tenant=raw_tenant)
        if compress:
            counts = compress_histories(db, TENANT, conversations, embedder)
            packed = evaluate_budgets(
                db,
                conversations,
                embedder,
                chosen,
                config=config,
                raw_tenant=raw_tenant,
                sources=compressed_sources(db, TENANT),
            )
            report["compression"] = {**counts, "by_budget": compare(report, packed)}
    return {
        **report,
        "extractor": extractor,
        "data_status": data_status(files),
        "episodes": episodes,
        "sessions": sum(len(c.sessions) for c in conversations),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _files(paths: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return found

"""How good is the offline extractor? Measured on the five LoCoMo conversations (128 sessions).

Run from the repository root:

    python bench/offline_extractor_quality.py            # readable report
    python bench/offline_extractor_quality.py --json     # machine-readable
    python bench/offline_extractor_quality.py --coding   # coding sessions: Claude Code files and sde-bench chats

The data is read from ``../shared/data/locomo`` (override with ``--data``) and never copied into the
repository. Each session becomes one transcript (every turn is a ``user`` message named after its
speaker; a shared photo is appended as `` [shares a photo: <caption>]``; message index i = turn i+1),
the offline extractor runs on it, and its episode is compared with LoCoMo's references. What each
figure means is printed in the report header (see ``HEADER``).

``--coding`` measures coding sessions instead (bench/_coding_quality.py): the Claude Code
session files of ``../shared/data/claude-code`` and the decision chats of ``../shared/data/sde-bench``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from jobs.embeddings import get_embedder  # noqa: E402
from jobs.extract.offline import OfflineExtractor  # noqa: E402
from jobs.models import (  # noqa: E402
    Message,
    Transcript,
)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
THRESHOLDS = (0.5, 0.6)

HEADER = """\
Offline extractor vs LoCoMo references ({sessions} sessions in {conversations} conversations; extractor {version})
Every figure is per session, then summarised as median and mean over sessions (micro = pooled counts).
  summary  R1rec   ROUGE-1 recall: share of the reference summary's words (lowercase word tokens, clipped
                   counts) that the extracted summary contains.
           RLf1    ROUGE-L F1: longest common word subsequence, harmonic mean of its precision and recall.
           cos     MiniLM cosine between extracted and reference summary (all-MiniLM-L6-v2 in float32, the
                   exact model, whatever precision the extractor runs with).
           lead3   the same three figures for a naive baseline: the session's first three sentences.
  events   rec@t   share of reference events (events_session_N, both speakers) whose best-matching
                   extracted key event (MiniLM cosine of `what` vs the event) has cosine >= t.
                   Sessions without reference events are left out of rec; micro pools all events.
           prec@t  share of extracted key events that match some reference event at cosine >= t.
                   Sessions without extracted events are left out of prec. LoCoMo's events are life
                   events ("X adopts a dog"); the extractor emits decisions, commitments, open questions
                   and surprises, so low figures partly measure that mismatch.
  evidence obsCov  share of the session's observation turns (session_N_observation dia_ids) cited in
                   some extracted event's evidence. cited = share of all turns cited (a random citer
                   with that many citations would reach about this coverage).
  speed    wall-clock ms per extract() after the model is loaded (median, p95), sessions per second,
           and CPU ms (all threads of this process). Embedding dominates; other processes on the
           machine inflate wall time, so the load average at the start of the run is printed too.
"""


# -- data ----------------------------------------------------------------------------------------


def load_sessions(data: Path) -> list[dict]:
    """One dict per session with its transcript and references (sessions without turns are skipped)."""
    out = []
    for path in sorted(data.glob("*.json")):
        conv = json.loads(path.read_text())
        numbers = sorted(int(m[1]) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        for n in numbers:
            turns = conv[f"session_{n}"]
            when = conv.get(f"session_{n}_date_time")
            if not turns or not when:
                continue
            ended = dt.datetime.strptime(when.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)
            messages = [Message(role="user", name=t["speaker"], content=t["text"] + photo(t)) for t in turns]
            events = [
                e for speaker, items in conv.get(f"events_session_{n}", {}).items() if speaker != "date" for e in items
            ]
            observed = set()
            for items in conv.get(f"session_{n}_observation", {}).values():
                for _fact, ids in items:
                    for s, turn in re.findall(r"D(\d+):(\d+)", str(ids)):
                        if int(s) == n and 1 <= int(turn) <= len(turns):
                            observed.add(int(turn) - 1)
            out.append(
                {
                    "conversation": path.stem,
                    "session": n,
                    "transcript": Transcript(
                        id=n,
                        tenant_id="locomo",
                        user_id=path.stem,
                        session_id=f"{path.stem}-{n}",
                        purpose="general",
                        started_at=None,
                        ended_at=ended,
                        messages=messages,
                    ),
                    "reference_summary": conv.get(f"session_{n}_summary", ""),
                    "reference_events": events,
                    "observed_turns": sorted(observed),
                }
            )
    return out


def photo(turn: dict) -> str:
    return f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""


# -- metrics -------------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def rouge1_recall(candidate: str, reference: str) -> float:
    ref, cand = Counter(tokens(reference)), Counter(tokens(candidate))
    total = sum(ref.values())
    return sum(min(c, cand[w]) for w, c in ref.items()) / total if total else 0.0


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Classic dynamic programme, one row at a time (O(len(a) * len(b)) time, O(len(b)) memory)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l_f1(candidate: str, reference: str) -> float:
    cand, ref = tokens(candidate), tokens(reference)
    lcs = lcs_length(cand, ref)
    if not lcs:
        return 0.0
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def lead3(transcript: Transcript) -> str:
    text = " ".join(m.content for m in transcript.messages)
    return " ".join(re.split(r"(?<=[.!?])\s+", text)[:3])


def event_scores(whats: list[str], refs: list[str], embedder) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    sims = None
    if whats and refs:
        sims = embedder.embed(whats) @ embedder.embed(refs).T  # rows: extracted, columns: reference
    for t in THRESHOLDS:
        if not refs:
            out[f"rec@{t}"], out[f"hit@{t}"] = None, 0
        else:
            hits = int((sims.max(axis=0) >= t).sum()) if sims is not None else 0
            out[f"rec@{t}"], out[f"hit@{t}"] = hits / len(refs), hits
        if not whats:
            out[f"prec@{t}"], out[f"good@{t}"] = None, 0
        else:
            good = int((sims.max(axis=1) >= t).sum()) if sims is not None else 0
            out[f"prec@{t}"], out[f"good@{t}"] = good / len(whats), good
    return out


# -- run -----------------------------------------------------------------------------------------


def run(data: Path, limit: int | None = None, embed_budget: int | None = None, threads: int = 1) -> dict:
    embedder = get_embedder("minilm", threads=threads)  # what the extractor runs on (the product's default)
    judge = get_embedder("minilm-fp32")  # scores with the exact float model, whatever the default
    extractor = (
        OfflineExtractor(embedder) if embed_budget is None else OfflineExtractor(embedder, embed_budget=embed_budget)
    )
    sessions = load_sessions(data)[:limit]
    extractor.extract(sessions[0]["transcript"])  # warm-up: model load and first-call overheads
    load = os.getloadavg()[0]
    rows = []
    for s in sessions:
        transcript = s["transcript"]
        start, cpu = time.perf_counter(), time.process_time()
        result = extractor.extract(transcript)
        ms, cpu_ms = (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000
        episode = result.extraction
        baseline = lead3(transcript)
        ref = s["reference_summary"]
        vectors = judge.embed([episode.summary, ref, baseline])
        cited = {i for e in episode.key_events for i in e.evidence}
        observed = set(s["observed_turns"])
        row = {
            "conversation": s["conversation"],
            "session": s["session"],
            "turns": len(transcript.messages),
            "ms": ms,
            "cpu_ms": cpu_ms,
            "R1rec": rouge1_recall(episode.summary, ref),
            "RLf1": rouge_l_f1(episode.summary, ref),
            "cos": float(vectors[0] @ vectors[1]),
            "lead3_R1rec": rouge1_recall(baseline, ref),
            "lead3_RLf1": rouge_l_f1(baseline, ref),
            "lead3_cos": float(vectors[2] @ vectors[1]),
            "events": len(episode.key_events),
            "reference_events": len(s["reference_events"]),
            "types": dict(Counter(e.type for e in episode.key_events)),
            "obsCov": len(cited & observed) / len(observed) if observed else None,
            "obs": len(observed),
            "obs_hit": len(cited & observed),
            "cited": len(cited) / len(transcript.messages),
            "summary_chars": len(episode.summary),
            "tags": len(episode.topic_tags),
            "entities": len(episode.entities),
        }
        row.update(event_scores([e.what for e in episode.key_events], s["reference_events"], judge))
        rows.append(row)
    return {
        "extractor": f"{extractor.name}/{extractor.prompt_version}, embed budget {extractor.embed_budget} words",
        "data": str(data),
        "sessions": rows,
        "threads": embedder.threads,
        "load_average": load,
        "overall": summarise(rows),
        "by_conversation": {
            c: summarise([r for r in rows if r["conversation"] == c]) for c in sorted({r["conversation"] for r in rows})
        },
    }


METRICS = [
    "R1rec",
    "RLf1",
    "cos",
    "lead3_R1rec",
    "lead3_RLf1",
    "lead3_cos",
    *[f"{k}@{t}" for t in THRESHOLDS for k in ("rec", "prec")],
    "obsCov",
    "cited",
    "events",
]


def summarise(rows: list[dict]) -> dict:
    out: dict = {"sessions": len(rows)}
    for key in METRICS:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = {
            "median": statistics.median(values) if values else None,
            "mean": statistics.fmean(values) if values else None,
            "n": len(values),
        }
    for t in THRESHOLDS:
        refs, whats = sum(r["reference_events"] for r in rows), sum(r["events"] for r in rows)
        out[f"micro_rec@{t}"] = sum(r[f"hit@{t}"] for r in rows) / refs if refs else None
        out[f"micro_prec@{t}"] = sum(r[f"good@{t}"] for r in rows) / whats if whats else None
    obs = sum(r["obs"] for r in rows)
    out["micro_obsCov"] = sum(r["obs_hit"] for r in rows) / obs if obs else None
    ms = sorted(r["ms"] for r in rows)
    out["ms_median"] = statistics.median(ms)
    out["ms_p95"] = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    out["sessions_per_s"] = len(ms) / (sum(ms) / 1000)
    out["cpu_ms_median"] = statistics.median(r["cpu_ms"] for r in rows)
    out["event_types"] = dict(sum((Counter(r["types"]) for r in rows), Counter()))
    return out


def _fmt(value: float | None, digits: int = 3) -> str:
    return "  -  " if value is None else f"{value:.{digits}f}"


def report(result: dict) -> str:
    overall = result["overall"]
    lines = [
        HEADER.format(
            sessions=overall["sessions"], conversations=len(result["by_conversation"]), version=result["extractor"]
        )
    ]
    cols = ["R1rec", "RLf1", "cos", "rec@0.5", "prec@0.5", "rec@0.6", "prec@0.6", "obsCov", "cited"]
    head = f"{'conv':>5} {'n':>3} " + " ".join(f"{c:>8}" for c in cols) + f" {'ms med':>7} {'events':>6}"
    lines += ["Per conversation (means over its sessions):", head]
    for conv, s in result["by_conversation"].items():
        lines.append(
            f"{conv:>5} {s['sessions']:>3} "
            + " ".join(f"{_fmt(s[c]['mean']):>8}" for c in cols)
            + f" {s['ms_median']:>7.1f} {s['events']['mean']:>6.2f}"
        )
    lines += ["", "Overall:", f"{'metric':>12} {'median':>8} {'mean':>8}   (lead3 baseline: median / mean)"]
    for c in ("R1rec", "RLf1", "cos"):
        base = overall[f"lead3_{c}"]
        lines.append(
            f"{'summary ' + c:>12} {_fmt(overall[c]['median']):>8} {_fmt(overall[c]['mean']):>8}"
            f"   ({_fmt(base['median'])} / {_fmt(base['mean'])})"
        )
    for c in cols[3:]:
        micro = overall.get(f"micro_{c}")
        lines.append(
            f"{c:>12} {_fmt(overall[c]['median']):>8} {_fmt(overall[c]['mean']):>8}"
            + (f"   micro {_fmt(micro)}" if micro is not None else "")
            + f"   (n={overall[c]['n']})"
        )
    events = overall["events"]
    lines.append(
        f"{'events/sess':>12} {_fmt(events['median'], 1):>8} {_fmt(events['mean'], 2):>8}"
        f"   by type: {json.dumps(overall['event_types'], sort_keys=True)}"
    )
    turns = statistics.fmean(r["turns"] for r in result["sessions"])
    lines.append(
        f"{'speed':>12} median {overall['ms_median']:.1f} ms, p95 {overall['ms_p95']:.1f} ms per session, "
        f"{overall['sessions_per_s']:.1f} sessions/s, CPU median {overall['cpu_ms_median']:.1f} ms "
        f"(mean {turns:.1f} turns; {os.cpu_count()} CPUs, {result['threads']} embedding thread(s), "
        f"load average {result['load_average']:.2f})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="directory of LoCoMo *.json files")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the report")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sessions (quick runs)")
    parser.add_argument(
        "--embed-budget",
        type=int,
        default=None,
        help="words embedded per transcript (the extractor's speed/quality knob)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="ONNX Runtime CPU threads per embed call (default: 1)"
    )
    parser.add_argument(
        "--coding",
        action="store_true",
        help="measure coding sessions (../shared/data/claude-code and sde-bench) instead of LoCoMo",
    )
    parser.add_argument("--show", action="store_true", help="with --coding: every tuning-set event and tag")
    args = parser.parse_args(argv)
    if args.coding:
        import _coding_quality as coding_quality

        shared = args.data.parent if args.data != DEFAULT_DATA else DEFAULT_DATA.parent
        result = coding_quality.run(shared / "claude-code", shared / "sde-bench", args.limit)
        print(json.dumps(result, indent=1, default=str) if args.json else coding_quality.report(result, args.show))
        return
    if not any(args.data.glob("*.json")):
        parser.error(f"no LoCoMo *.json files in {args.data}")
    result = run(args.data, args.limit, args.embed_budget, args.threads or 1)
    print(json.dumps(result, indent=1, default=str) if args.json else report(result))


if __name__ == "__main__":
    main()

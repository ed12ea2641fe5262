"""A compress run over every qualifying group, the scheduler's yearly job, and one period's rebuild.

One run at a time: a session advisory lock (:func:`run_lock`); a second runner raises
:class:`~jobs.errors.CompressBusy`. A run plans, skips what is up to date, then prepares (reads and
compresses) groups ``concurrency`` at a time, embeds them ``batch_size`` at a time and writes each in
its own transaction (:mod:`jobs.compress.group`). A failed group is counted and left for the next
run; a :class:`~jobs.errors.ConfigError` stops the run. The run is recorded in ``job_runs``
(:mod:`jobs.runs`).

``purge_embeddings`` drops the vectors of compressed sources (about 1.5 KB each at 384 dimensions):
they are out of recall anyway, but analysts lose vector search over them, a removed super's sources
return to recall without vectors until re-embedded, and the offline compressor re-embeds them in
memory when their period is rebuilt.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from jobs.compress.compressor import Compressor
from jobs.compress.group import (
    GroupOutcome,
    PreparedGroup,
    embed_prepared,
    prepare_group,
    process_group,
    write_group,
)
from jobs.compress.periods import UNITS, Period, cutoff_time, period_floor
from jobs.compress.plan import PlannedGroup, plan
from jobs.compress.state import damaged_history, delete_supers, group_scope, lock_user
from jobs.config import Settings
from jobs.db import Database, one
from jobs.embeddings import Embedder, embedder_for
from jobs.errors import CompressBusy, ConfigError
from jobs.registry import COMPRESSORS, load
from jobs.runs import finish_run, start_run, worker_id
from jobs.sql import query

log = logging.getLogger(__name__)

RUN_LOCK_KEY = 0x6570697363707273  # "episcprs": one compress runner per database


def make_compressor(settings: Settings, name: str | None = None, embedder: Embedder | None = None) -> Compressor:
    """The compressor registered as ``name`` in the ``episodes.compressors`` entry points
    (:mod:`jobs.registry`): anthropic, offline, claude-code or a third party's.

    ``name`` None or ``auto`` means the extractor setting (``EPISODES_EXTRACTOR``) as
    :attr:`Settings.resolved_extractor` resolves it, so a period is compressed by the back end
    that summarises its sessions.
    """
    chosen = settings.resolved_extractor if name in (None, "", "auto") else name
    compressor: Compressor = load(COMPRESSORS, chosen, "compressor")(settings, embedder)
    return compressor


@dataclass
class CompressReport:
    period: str
    cutoff: dt.datetime
    boundary: dt.date
    dry_run: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    planned: list[PlannedGroup] = field(default_factory=list)
    sources: int = 0  # session episodes compressed by this run
    call_tokens: list[int] = field(default_factory=list)  # input tokens (incl. cached) per model call
    output_tokens: int = 0
    cost_usd: float = 0.0
    purged: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.counts["failed"]

    def line(self) -> str:
        order = ["created", "rebuilt", "removed", "unchanged", "failed", "changed", "skipped"]
        verb = "would be " if self.dry_run else ""
        parts = [f"{verb}{k} {self.counts[k]}" for k in order if self.counts[k] or k in ("created", "unchanged")]
        tokens = (
            (
                f" · model calls {len(self.call_tokens)} · tokens {sum(self.call_tokens):,} in / "
                f"{self.output_tokens:,} out (max {max(self.call_tokens, default=0):,} per call) · "
                f"est. cost ${self.cost_usd:.4f}"
            )
            if not self.dry_run
            else ""
        )
        purged = f" · embeddings purged {self.purged}" if self.purged else ""
        return (
            f"compress {self.period}s ending before {self.boundary}: "
            + " · ".join(parts)
            + f" · sessions compressed {self.sources}{tokens}{purged} · {self.seconds:.1f}s"
        )

    def tally(self, result: GroupOutcome) -> None:
        self.counts[result.outcome] += 1
        self.sources += result.sources
        self.call_tokens += [c.input_tokens + c.cache_read_tokens + c.cache_write_tokens for c in result.calls]
        self.output_tokens += sum(c.output_tokens for c in result.calls)
        self.cost_usd += sum(c.cost_usd for c in result.calls)
        if result.error:
            self.errors.append(result.error)


@contextmanager
def run_lock(db: Database) -> Iterator[None]:
    """The single-runner lock; raises CompressBusy when another run holds it."""
    conn = db.connect(autocommit=True)
    try:
        if not one(conn.execute(query("compress_try_lock"), {"key": RUN_LOCK_KEY}))["locked"]:
            log.warning("another compress run holds the lock", extra={"action": "compress_busy"})
            raise CompressBusy()
        try:
            yield
        finally:
            conn.execute(query("compress_unlock"), {"key": RUN_LOCK_KEY})
    finally:
        conn.close()


class _Lazy:
    """Builds the compressor and the embedder only when a group needs them (a no-op run needs neither)."""

    def __init__(self, settings: Settings, compressor: Compressor | None, embedder: Embedder | None) -> None:
        self.settings = settings
        self._compressor, self._embedder = compressor, embedder
        self._own = compressor is None
        self._lock = threading.Lock()

    def compressor(self) -> Compressor:
        with self._lock:
            if self._compressor is None:
                self._compressor = make_compressor(self.settings, embedder=self._embedder)
            return self._compressor

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = embedder_for(self.settings)
            return self._embedder

    def close(self) -> None:
        """Close the compressor if this object made it (a caller's own compressor is the caller's to close)."""
        if self._own and self._compressor is not None:
            self._compressor.close()


def _plan_only(db: Database, report: CompressReport, tenant: str | None, user: str | None) -> None:
    """A dry run: count what each group would become and list the groups a run would change."""
    for group in plan(db, report.period, report.boundary, tenant, user):
        report.counts[group.action] += 1
        if group.action in ("created", "rebuilt", "removed"):
            report.planned.append(group)


def _compress_groups(
    db: Database,
    groups: list[PlannedGroup],
    lazy: _Lazy,
    run_id: int | None,
    report: CompressReport,
    fatal: list[BaseException],
    concurrency: int,
    batch_size: int,
    progress: Callable[[int], object] | None,
) -> None:
    """Read and compress ``groups`` ``concurrency`` at a time, embed them ``batch_size`` at a time and write
    each in its own transaction, tallying into ``report``. A ConfigError (no usable compressor) is put in
    ``fatal`` and stops the run after the batch in hand."""

    def prepare(group: PlannedGroup) -> PreparedGroup | None:
        if fatal:
            return None
        try:
            return prepare_group(
                db, group.tenant_id, group.user_id, group.period, compressor=lazy.compressor, job_run_id=run_id
            )
        except ConfigError as exc:
            fatal.append(exc)
            return None

    def write(pv: tuple[PreparedGroup, np.ndarray | None]) -> GroupOutcome:
        return write_group(db, pv[0], pv[1], run_id)

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="compress") if concurrency > 1 else None
    try:
        for at in range(0, len(groups), batch_size):
            chunk = groups[at : at + batch_size]
            prepared = list(pool.map(prepare, chunk) if pool else map(prepare, chunk))
            if fatal:
                break
            ready = [p for p in prepared if p is not None]
            vectors = embed_prepared(db, ready, lazy.embedder, run_id)
            writes = list(zip(ready, vectors))
            for result in pool.map(write, writes) if pool else map(write, writes):
                report.tally(result)
                if progress:
                    progress(1)
    finally:
        if pool:
            pool.shutdown()


def run_compress(
    db: Database,
    *,
    older_than: str | dt.timedelta = "12mo",
    period: str = "year",
    tenant: str | None = None,
    user: str | None = None,
    dry_run: bool = False,
    compressor: Compressor | None = None,
    now: dt.datetime | None = None,
    purge_embeddings: bool = False,
    concurrency: int = 1,
    embedder: Embedder | None = None,
    progress: Callable[[int], object] | None = None,
    batch_size: int = 32,
    record_run: bool = True,
) -> CompressReport:
    """Compress every qualifying (tenant, user, period); see :mod:`jobs.compress`. Safe to re-run.

    ``compressor`` None picks one like the summarize job (Claude with an API key, else offline), and
    only if some group needs it. ``dry_run`` reads the plan only: no lock, no model call, no write.
    Groups are read and compressed ``concurrency`` at a time, embedded ``batch_size`` at a time, and
    each is written in its own transaction; ``progress`` is called with 1 after each (e.g. a tqdm
    bar's ``update``; what it returns is ignored). ``record_run`` False leaves the ``job_runs`` row
    to the caller (the scheduler records its own).
    """
    if period not in UNITS:
        raise ConfigError(f"period {period!r} is unknown; use year, quarter or month.")
    now = now or dt.datetime.now(dt.UTC)
    now = now if now.tzinfo else now.replace(tzinfo=dt.UTC)
    cutoff = cutoff_time(now, older_than)
    boundary = period_floor(cutoff, period)
    report = CompressReport(period=period, cutoff=cutoff, boundary=boundary, dry_run=dry_run)
    started = time.perf_counter()
    if dry_run:
        _plan_only(db, report, tenant, user)
        report.seconds = time.perf_counter() - started
        return report
    with run_lock(db):
        groups = []
        for group in plan(db, period, boundary, tenant, user):
            if group.action in ("unchanged", "single"):
                report.counts[group.action] += 1  # nothing to read, no model call
            else:
                groups.append(group)
        run_id = start_run(db, "compress", worker_id()) if record_run else None
        lazy = _Lazy(db.settings, compressor, embedder)
        fatal: list[BaseException] = []
        try:
            _compress_groups(db, groups, lazy, run_id, report, fatal, concurrency, batch_size, progress)
            if purge_embeddings and not fatal:
                with db.admin() as conn:
                    purge = conn.execute(query("compress_purge_embeddings"), {"tenant": tenant, "user": user})
                    report.purged = purge.rowcount
        finally:
            lazy.close()
            report.seconds = time.perf_counter() - started
            if run_id is not None:
                finish_run(
                    db,
                    run_id,
                    counts=report.counts,
                    failed=bool(fatal),
                    error=fatal[0] if fatal else ("; ".join(report.errors)[:2000] or None),
                )
    if fatal:
        raise fatal[0]
    return report


def scheduled_compress(db: Database) -> dict[str, int]:
    """The yearly job of `episodes serve`: the defaults (12mo, year, compressor from the settings).

    The scheduler records the run with the counts returned here. A compress run already in progress
    (e.g. from the CLI) is not an error: the counts say ``busy``. Failed periods are counted
    (``failed``) and completed by the next run.
    """
    try:
        report = run_compress(db, concurrency=4, record_run=False)
    except CompressBusy:
        return {"busy": 1}
    if report.failed:
        log.warning("compress left %d periods for the next run", report.failed, extra={"action": "compress_failed"})
    return {
        **{k: v for k, v in report.counts.items() if v},
        "sessions": report.sources,
        "model_calls": len(report.call_tokens),
        "input_tokens": sum(report.call_tokens),
    }


def rebuild_period(
    db: Database,
    tenant_id: str,
    user_id: str,
    period_start: dt.date,
    period_end: dt.date,
    *,
    compressor: Compressor | None = None,
    embedder: Embedder | None = None,
    force: bool = False,
    recreate: bool = False,
) -> str:
    """Bring one compressed period up to date after its sources changed (e.g. one was erased).

    Pass the super's own ``period_start`` / ``period_end``. Returns what happened: ``rebuilt`` (from
    the remaining sources; an old super whose source was deleted is deleted, not kept as
    superseded), ``removed`` (fewer than two sources remain: the super is deleted and the remaining
    source is back in recall), ``unchanged``, ``uncompressed`` (the period has no super: nothing to
    rebuild), ``changed`` (a concurrent writer got there first; call again) or ``failed``.
    Superseded supers of the period that held a deleted source are deleted in any case. ``force``
    rebuilds an up-to-date super too. ``recreate`` compresses the period even when it has no super
    left (``forget_episode`` deletes the super in its own transaction, so no erased text outlives a
    failed rebuild); the outcome is then ``created``. The model is only called when a super is written.
    """
    period = Period(period_start, period_end)
    lazy = _Lazy(db.settings, compressor, embedder)
    try:
        result = process_group(
            db,
            tenant_id,
            user_id,
            period,
            compressor=lazy.compressor,
            embedder=lazy.embedder,
            force=force,
            only_compressed=not recreate,
        )
    finally:
        lazy.close()
    scope = group_scope(tenant_id, user_id, period)
    with db.tenant(tenant_id) as conn:  # audit copies that held an erased source go too
        lock_user(conn, scope)
        delete_supers(conn, scope, damaged_history(conn, scope))
    return "uncompressed" if result.outcome == "single" else result.outcome

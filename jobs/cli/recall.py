"""CLI commands `episodes recall`, `episodes eval locomo` and `episodes eval coding` (registered on the group in jobs/cli/__init__.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import click

from jobs.cli.base import Context
from jobs.concepts import DEFAULT_BUDGET_TOKENS

EXAMPLE_BUDGETS = f"{DEFAULT_BUDGET_TOKENS},{DEFAULT_BUDGET_TOKENS // 2}"  # in help: the default and half of it


def _positive_budget(ctx: click.Context, param: click.Parameter, value: int) -> int:
    if value < 1:
        raise click.BadParameter(
            f"{value} tokens cannot hold a block; give a budget of at least 1 "
            f"(about 210 shows a session; the default is {DEFAULT_BUDGET_TOKENS})."
        )
    return value


@click.command("recall")
@click.argument("opening_message")
@click.option("--tenant", required=True, help="Tenant of the user.")
@click.option("--user", "user_id", required=True, help="User whose earlier episodes are recalled.")
@click.option("--purpose", help="Only episodes of this purpose and 'general' (see EPISODES_PURPOSE_MAP).")
@click.option(
    "--budget",
    type=int,
    default=DEFAULT_BUDGET_TOKENS,
    show_default=True,
    callback=_positive_budget,
    help="Token budget of the block (tokens estimated as characters / 4). Below about 210 the block "
    "may show no session, only how many there are.",
)
@click.option("--now", type=click.DateTime(), help="Recall as of this time (UTC); default: now.")
@click.option("--json", "as_json", is_flag=True, help="Print the episodes, their scores and reasons as JSON.")
@click.pass_obj
def recall_command(
    obj: Context,
    opening_message: str,
    tenant: str,
    user_id: str,
    purpose: str | None,
    budget: int,
    now: dt.datetime | None,
    as_json: bool,
) -> None:
    """Print the <previous_episodes> block for a user's new session starting with OPENING_MESSAGE.

    Recent episodes plus the ones most relevant to the opening message (exact hybrid search over
    the user's episodes), still-open questions and commitments, within the token budget.
    """
    from jobs.recall.recaller import Recaller

    result = Recaller(obj.database()).recall(
        tenant,
        user_id,
        opening_message,
        purpose=purpose,
        budget_tokens=budget,
        now=now.replace(tzinfo=dt.UTC) if now else None,
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))  # the body of POST /v1/recall
        return
    block = result.render()
    if not block:
        raise click.ClickException(
            f"--budget {budget} is too small for even the shortest block; use --budget {result.minimum_budget} or more."
        )
    click.echo(block)


def _budgets(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    """``--budgets A,B`` as [A, B]; a clear error naming the bad part otherwise."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of positive token budgets, e.g. {EXAMPLE_BUDGETS}."
        )
    return list(dict.fromkeys(int(p) for p in parts))


@click.group("eval")
def eval_group() -> None:
    """Measure episodes on benchmark data (the data is read, never copied)."""


@eval_group.command("locomo")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--extractor",
    type=click.Choice(["oracle", "offline", "anthropic"]),
    default="oracle",
    show_default=True,
    help="oracle: reference summaries and events stand in for episodes; offline / anthropic: "
    "ingest the sessions and run the summarize job with that extractor.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=DEFAULT_BUDGET_TOKENS,
    show_default=True,
    help="Token budget of each recall block.",
)
@click.option(
    "--budgets",
    callback=_budgets,
    help=f"Several token budgets in one run, comma-separated (e.g. {EXAMPLE_BUDGETS}), printed side by side; overrides --budget.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "--per-conversation",
    is_flag=True,
    help="Also print one row per conversation (the JSON always holds per_conversation).",
)
@click.option(
    "--compress",
    is_flag=True,
    help="Then compress every month of sessions older than each conversation's last 30 days into "
    "super-summaries (the compress job, offline compressor) and report answer coverage compressed beside "
    "uncompressed.",
)
@click.pass_obj
def locomo_command(
    obj: Context,
    paths: tuple[Path, ...],
    extractor: str,
    budget: int,
    budgets: list[int] | None,
    as_json: bool,
    per_conversation: bool,
    compress: bool,
) -> None:
    """Recall LoCoMo questions (categories 1-4) and report evidence recall and block size.

    PATHS are LoCoMo conversation files or directories of them. They are loaded into a scratch
    database (episodes_eval_<pid>) on the configured server, which is dropped afterwards. Reports
    all-evidence and any-evidence recall, mean and p95 block tokens, per category, and baselines,
    and the block's answer coverage beside the raw-message baselines' (every user and assistant
    message embedded, the closest to the question filling the same budget; undated, and each led by
    its session's date) with the ratio to the better of the two, at each budget.
    """
    from jobs.eval.locomo import run_eval
    from jobs.eval.locomo_report import format_report

    if extractor == "offline" and not as_json:
        click.echo("Using the offline extractor: deterministic, lower quality than Claude.", err=True)
    report = run_eval(obj.settings, list(paths), extractor=extractor, budgets=budgets or [budget], compress=compress)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report, per_conversation=per_conversation))


@eval_group.command("coding")
@click.option(
    "--sde-bench",
    "sde_bench",
    type=click.Path(path_type=Path),
    default=Path("../shared/data/sde-bench"),
    show_default=True,
    help="Folder of vectorize-io/sde-bench (decoy_conversations.json, MANIFEST.json, tasks/).",
)
@click.option(
    "--claude-code",
    "claude_code_root",
    type=click.Path(path_type=Path),
    default=Path("../shared/data/claude-code"),
    show_default=True,
    help="Folder of the Claude Code session files that jobs/eval/claude_code_questions.json asks about.",
)
@click.option("--only", type=click.Choice(["sde-bench", "claude-code"]), help="Measure one data set only.")
@click.option(
    "--extractor",
    default="offline",
    show_default=True,
    help="The extractor that summarises the sessions (any installed name, as for summarize).",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=DEFAULT_BUDGET_TOKENS,
    show_default=True,
    help="Token budget of each recall block (and of the raw-message baseline).",
)
@click.option(
    "--budgets",
    callback=_budgets,
    help=f"Several token budgets in one run, comma-separated (e.g. {EXAMPLE_BUDGETS}), printed side by side; overrides --budget.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.pass_obj
def coding_command(
    obj: Context,
    sde_bench: Path,
    claude_code_root: Path,
    only: str | None,
    extractor: str,
    budget: int,
    budgets: list[int] | None,
    as_json: bool,
) -> None:
    """Measure what the block carries into the next coding session, beside the raw-message baseline.

    sde-bench: per task, a user holding the 140 decoy chats and the task's own chat(s), summarised end
    to end; the task's bug report opens the next session. Reports evidence (the decision chat's episode
    in the block), answer coverage of the task's policy words beside the raw-message baseline's, how many
    of the 6 amended tasks present the latest rule as the one that holds, and the still-open items shown.
    Then one developer's history: every chat and decoy under one user, each bug report recalled from it
    (the amending chat labelled relevant, the superseded one replaced, "nothing relates" above a best match).
    Claude Code: the project's own questions about real session files, one user per file. Each data set
    runs in a scratch database (episodes_eval_<pid>) on the configured server, dropped afterwards.
    """
    from jobs.eval.coding import format_report, run

    if extractor == "offline" and not as_json:
        click.echo("Using the offline extractor: deterministic, lower quality than Claude.", err=True)
    report = run(
        obj.settings,
        sde_bench=sde_bench,
        claude_code_root=claude_code_root,
        only=only,
        extractor=extractor,
        budgets=budgets or [budget],
    )
    click.echo(json.dumps(report, indent=2, default=str) if as_json else format_report(report))

"""Every `episodes` command, by name: where it lives and its one-line help.

The group (jobs/cli/base.py) lists commands from this table and imports a command's module only when
that command runs or is asked for its own --help: the modules behind the commands import psycopg,
numpy, pandas, onnxruntime, fastapi and mcp, and `episodes --help` (or a Claude Code hook) should not
wait for them. tests/test_cli_start.py keeps the table true: every entry imports and is that command,
its help is the command's own short help, and every command module's command is listed here."""

from __future__ import annotations

from typing import NamedTuple


class LazyCommand(NamedTuple):
    target: str
    """``"module:attribute"`` of the click command."""
    short_help: str
    """The command's ``get_short_help_str()`` (untruncated), shown by `episodes --help`."""


COMMANDS: dict[str, LazyCommand] = {
    "api": LazyCommand(
        "jobs.cli.api:api_command",
        "Serve recall, transcripts, episodes, events and users over HTTP with per-tenant API keys.",
    ),
    "claude-code": LazyCommand(
        "jobs.cli.claude_code:claude_code_group",
        "Claude Code remembers across sessions: hooks inject memory at start and hand sessions over.",
    ),
    "compress": LazyCommand(
        "jobs.cli.compress:compress_command", "Merge old session episodes into one super-summary per user and period."
    ),
    "correct": LazyCommand(
        "jobs.cli.privacy:correct_command",
        "Correct one episode: its summary, an event's text or status, or drop an event.",
    ),
    "db": LazyCommand(
        "jobs.cli.db:db_group",
        "The database: its URL, a psql on it, and the embedded PostgreSQL (DATABASE_URL unset), which keeps "
        "running after each command: stop it here.",
    ),
    "demo": LazyCommand(
        "jobs.cli.demo:demo",
        "Initialise the database, load the bundled example transcripts, summarise them, compress the old "
        "year, show the status and what an agent would recall at its next session.",
    ),
    "eval": LazyCommand(
        "jobs.cli.recall:eval_group", "Measure episodes on benchmark data (the data is read, never copied)."
    ),
    "export": LazyCommand(
        "jobs.cli.privacy:export_command",
        "Print everything held about a user as JSON: transcripts, episodes with events and entities, "
        'super-summaries and model-call metadata ("what do you remember about me?").',
    ),
    "forget": LazyCommand(
        "jobs.cli.privacy:forget_command",
        "Erase a user, or one episode, in one transaction, and record it in `erasures` without the user id.",
    ),
    "ingest": LazyCommand(
        "jobs.cli.ingest:ingest", "Load transcripts from JSON / JSONL files or directories (recursively)."
    ),
    "init": LazyCommand("jobs.cli.setup:init", "Create the schema, or upgrade it to this version (safe to run again)."),
    "keys": LazyCommand(
        "jobs.cli.keys:keys_group", "Create, list and revoke API keys (each belongs to one tenant and holds scopes)."
    ),
    "mcp": LazyCommand(
        "jobs.cli.mcp:mcp_command",
        "Serve the memory of one user as MCP tools over stdin/stdout (the MCP stdio transport).",
    ),
    "pin": LazyCommand(
        "jobs.cli.lifecycle:pin_command", "Pin a session episode: no decay in recall, never compressed, never pruned."
    ),
    "prune": LazyCommand(
        "jobs.cli.lifecycle:prune_command",
        "Prune old memory: transcript bodies (--transcripts) or episodes (--policy); one of the two.",
    ),
    "recall": LazyCommand(
        "jobs.cli.recall:recall_command",
        "Print the <previous_episodes> block for a user's new session starting with OPENING_MESSAGE.",
    ),
    "reembed": LazyCommand(
        "jobs.cli.reembed:reembed_command",
        "Re-embed every episode with another embedder, then switch to it in one transaction.",
    ),
    "report": LazyCommand(
        "jobs.cli.report:report_command", "Write an HTML report of episodes, events, costs and failures."
    ),
    "resummarize": LazyCommand(
        "jobs.cli.lifecycle:resummarize_command", "Requeue chosen sessions for a new episode under the current prompt."
    ),
    "retry": LazyCommand(
        "jobs.cli.summarize:retry",
        "Requeue dead-lettered transcripts (after fixing the cause); `episodes run` picks them up.",
    ),
    "run": LazyCommand(
        "jobs.cli.summarize:run", "Summarise every eligible (closed, not yet summarised) transcript once."
    ),
    "serve": LazyCommand(
        "jobs.cli.summarize:serve",
        "Run the scheduler: summarize on NOTIFY (and poll), maintenance, yearly compression.",
    ),
    "status": LazyCommand(
        "jobs.cli.setup:status", "Show where the data lives, the schema version, the queue and the last job runs."
    ),
    "unpin": LazyCommand(
        "jobs.cli.lifecycle:unpin_command",
        "Unpin an episode: it decays again and may be compressed by the next compress run.",
    ),
    "vacuum": LazyCommand(
        "jobs.cli.privacy:vacuum_command", "VACUUM (ANALYZE) the tables erasures change, as their owner."
    ),
}

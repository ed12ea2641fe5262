"""The project's closed vocabularies, each spelled once: event types, entity kinds, key scopes, the
purpose rule and the default recall budget.

Why one module: these lists used to be copied into the pydantic models, the MCP tool schema, the
HTTP API, the report and the offline rules, each copy in its own order, and nothing noticed when one
fell behind (``preference`` never reached the report). Everything in Python now takes them from here;
what cannot import Python is tied to them by tests/test_concepts.py: the database's lookup table and
CHECK constraints, the analyst views and named queries, the templates and the offline rules.

Each list is a ``Literal`` (so mypy checks every place a name is written, e.g. ``scope("recal")``
fails the type check) and the tuple is taken from it with ``get_args``, so there is no second
spelling to keep in step. This module imports nothing of ours and nothing heavy: a CLI command's
``--help`` reads the default budget from it.

Adding an event type touches three places: :data:`EventType` (and, if it stays open or stands until
replaced, :data:`OPEN_ITEM_TYPES` or :data:`STANDING_TYPES`), a migration inserting it into
``event_types``, and the prompt (``KeyEvent.type``'s description in jobs/models.py, the extraction
system prompt). tests/test_concepts.py says what else is missing.
"""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

# -- key events --------------------------------------------------------------------------------

EventType = Literal["decision", "open_question", "commitment", "surprise", "preference", "fact"]
EVENT_TYPES: Final[tuple[EventType, ...]] = get_args(EventType)
# Stay open until a later episode answers or fulfils them (recall's "still open", the memory page).
OPEN_ITEM_TYPES: Final[tuple[EventType, ...]] = ("open_question", "commitment")
# Stand until a later episode of the same user replaces them (later wins; analyst.decisions).
STANDING_TYPES: Final[tuple[EventType, ...]] = ("decision", "preference")

# An event's status as the read API and the MCP tools report it, derived as of now (sql/service.sql,
# "events"): superseded, resolved (resolved or done), stale (an open item past its time), open.
EventStatus = Literal["open", "resolved", "stale", "superseded"]
EVENT_STATUSES: Final[tuple[EventStatus, ...]] = get_args(EventStatus)

EntityKind = Literal["person", "org", "product", "project", "place", "other"]
ENTITY_KINDS: Final[tuple[EntityKind, ...]] = get_args(EntityKind)

# -- API key scopes ----------------------------------------------------------------------------

# recall: recall, reads, search; ingest: POST transcripts; edit: correct, erase or pin single
# episodes (and, with recall, the memory page); admin: erase a user; export: everything held about a user,
# raw transcripts included (migration 0030). ``write`` is the scope keys held before ingest and edit were
# told apart (migration 0024): both of them, as it always allowed.
Scope = Literal["recall", "ingest", "edit", "write", "admin", "export"]
SCOPES: Final[tuple[Scope, ...]] = get_args(Scope)
IMPLIED_SCOPES: Final[dict[str, tuple[Scope, ...]]] = {"write": ("ingest", "edit")}

# -- purposes ----------------------------------------------------------------------------------

# A purpose is open-ended (support, sales, a Claude Code project's cc-<slug>-<hash>) but its spelling is
# fixed: the same rule as the CHECK on transcripts.purpose (migration 0001).
PURPOSE_PATTERN: Final = r"^[a-z0-9_-]{1,64}$"
PURPOSE_RULE: Final = "1-64 characters of lowercase letters, digits, _ and -"
PURPOSE = re.compile(PURPOSE_PATTERN)
# A session's purpose when the host names none; every purpose's recall sees it (jobs.recall.purposes).
DEFAULT_PURPOSE: Final = "general"

# -- recall ------------------------------------------------------------------------------------

# Tokens of the <previous_episodes> block when the caller names no budget (tokens are estimated as
# characters / 4; a block needs about 180 to show one session).
DEFAULT_BUDGET_TOKENS: Final = 1500
# What the HTTP API and the MCP tool accept (the CLI and Python accept any budget of at least 1).
MIN_BUDGET_TOKENS: Final = 50
MAX_BUDGET_TOKENS: Final = 100_000

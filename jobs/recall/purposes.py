"""Which purposes a recall may see.

With ``purpose=None`` every purpose is recalled. A requested purpose sees its own episodes and
``general`` ones, unless ``EPISODES_PURPOSE_MAP`` (Settings.purpose_map) says otherwise, e.g.
``marketing=marketing,general;support=support,billing,general``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jobs.concepts import DEFAULT_PURPOSE, PURPOSE, PURPOSE_RULE
from jobs.errors import ConfigError


def purpose_filter(purpose: str | None, purpose_map: Mapping[str, Sequence[str]] | None = None) -> list[str] | None:
    """Purposes a recall for ``purpose`` may see (None: all): its own and ``general``, unless
    ``purpose_map`` (Settings.purpose_map, from EPISODES_PURPOSE_MAP) says otherwise."""
    if purpose is None:
        return None
    if not PURPOSE.match(purpose):
        raise ConfigError(f"purpose {purpose!r} is invalid; use {PURPOSE_RULE}.")
    return sorted(set((purpose_map or {}).get(purpose, [purpose, DEFAULT_PURPOSE])))

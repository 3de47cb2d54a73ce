"""Structured JSON logs with request and event ids, and a last-line guard against leaking secrets."""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import re
import sys
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

# Key secrets and webhook signing secrets. Code never logs them; this filter is the safety net.
# Any brand a deployment may give its keys (svckit.apikeys: --key-prefixes), not only the default svc.
SECRET_PATTERN = re.compile(r"([a-z][a-z0-9]{0,15}_(?:live|test)_)[A-Za-z0-9]{8,}|whsec_[A-Za-z0-9+/=]{8,}")

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "taskName"}


def redact(text: str) -> str:
    return SECRET_PATTERN.sub(lambda m: (m.group(1) or "whsec_") + "[REDACTED]", text)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid:
            out["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return redact(json.dumps(out, default=str))


def setup_logging(service: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("aiosqlite", "asyncio", "hpack", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))
    # SQLAlchemy logs every statement (with parameters) once its logger is enabled for INFO.
    logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)

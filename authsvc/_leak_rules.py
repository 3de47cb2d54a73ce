"""What a leak report does to a key; pure (docs/authentication.md "Leaked keys").

Why: a key found in public is assumed to be in hostile hands from the moment it was published, so the
report kills it at once -- no grace period, whoever reported it. That includes a rotated-out secret still in
its overlap (rotation's grace is for the partner's deploys, not for a secret the world has seen): only the
leaked secret dies, its successor keeps working. A key that no longer works (revoked before, or past its
expiry) is left as it is: it is still ours (the scanner is told so), but there is nothing to revoke, no
audit record to add and nobody to e-mail, so a report sent twice changes nothing the second time.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from authsvc._model import ApiKey


@dataclass(frozen=True, slots=True)
class Leak:
    """One reported secret: its SHA-256 hex digest and where it was found."""

    token_hash: str
    url: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class LeakOutcome:
    token_hash: str
    key: ApiKey
    revoked_now: bool


# The longest URL kept in a reason and an event (the reason column holds 500 characters).
MAX_URL = 400
MAX_SOURCE = 40


class LeakAction(enum.Enum):
    REVOKE = "revoke"
    ALREADY_DEAD = "already_dead"


def leak_action(key: ApiKey, now: dt.datetime) -> LeakAction:
    if key.revoked_at is not None:
        return LeakAction.ALREADY_DEAD
    if key.expires_at is not None and key.expires_at <= now:
        return LeakAction.ALREADY_DEAD
    return LeakAction.REVOKE


def clip(value: str, limit: int) -> str:
    """A reporter's free text, printable and bounded (it reaches the audit trail, e-mails and events)."""
    clean = "".join(ch for ch in value if ch.isprintable())
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def leak_reason(url: str, source: str, reporter: str) -> str:
    """The revocation's reason, as the portal's key page and apikey.revoked show it."""
    where = f"found in public at {url}" if url else "found in public"
    detail = ", ".join(p for p in (reporter, source) if p)
    return f"{where} ({detail})" if detail else where

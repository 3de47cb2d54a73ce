"""Input checks shared by the RPCs. Each raises InvalidRequest (or InvalidCustomerRef) naming the field."""

from __future__ import annotations

import datetime as dt
import re

from authsvc._errors import InvalidCustomerRef, InvalidRequest
from authsvc._model import Actor
from svckit.freetext import free_text_problem

MAX_NAME = 200
MAX_ACTOR = 200
# A source address as recorded (actor.source_address, a session's address, the peer's).
MAX_SOURCE = 100
MAX_EMAIL = 254
MAX_USER_AGENT = 300
# An audit action ("key.revoked"), as stored and as a ListAuditEvents filter.
MAX_ACTION = 64
MAX_ID = 64
MAX_REASON = 500
MAX_EMAILS = 20
MAX_PARTNER_REF = 64
# A product service's booking reference (credit holds) and a credit's reference.
MAX_BOOKING_REF = 128
MAX_ALLOWANCE = 1_000_000_000
MAX_SEARCH_COUNT = 1000
MAX_RATE_LIMIT = 100_000
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_LOOKS_LIKE_EMAIL = re.compile(r"[^@]+@[^@]+\.[A-Za-z]{2,}$")
_PRINTABLE_ASCII = re.compile(r"^[\x21-\x7e]+$")


def text(value: str, field: str, *, max_len: int, required: bool = False) -> str:
    if required and not value.strip():
        raise InvalidRequest(f"{field}: required")
    problem = free_text_problem(value, max_len=max_len)
    if problem:
        raise InvalidRequest(f"{field}: {problem}")
    return value.strip()


def ident(value: str, field: str, prefix: str) -> str:
    if not value:
        raise InvalidRequest(f"{field}: required")
    if (
        len(value) > MAX_ID
        or not value.startswith(prefix + "_")
        or not value.isascii()
        or not value.isprintable()
    ):
        raise InvalidRequest(f"{field}: not a valid {prefix}_ id")
    return value


def actor(user: str, source_address: str, user_id: str = "") -> Actor:
    u = text(user, "actor.user", max_len=MAX_ACTOR, required=True)
    s = text(source_address, "actor.source_address", max_len=MAX_SOURCE)
    i = ident(user_id, "actor.user_id", "usr") if user_id else ""
    return Actor(u, s, i)


def emails(values: list[str]) -> tuple[str, ...]:
    if len(values) > MAX_EMAILS:
        raise InvalidRequest(f"admin_emails: at most {MAX_EMAILS} addresses")
    for v in values:
        if len(v) > MAX_EMAIL or not EMAIL.match(v):
            raise InvalidRequest(f"admin_emails: {v[:60]!r} is not an e-mail address")
    return tuple(values)


def rate_limit(value: int) -> int:
    """A key's requests a second; 0 means its environment's default."""
    if value < 0 or value > MAX_RATE_LIMIT:
        raise InvalidRequest(
            f"rate_limit: requests a second from 1 to {MAX_RATE_LIMIT}, or 0 for the environment's default"
        )
    return value


def page_size(value: int) -> int:
    if value < 0:
        raise InvalidRequest("page_size: must not be negative")
    if value == 0:
        return DEFAULT_PAGE_SIZE
    return min(value, MAX_PAGE_SIZE)


def day(value: str, now: dt.datetime) -> str:
    if not value:
        return now.astimezone(dt.UTC).date().isoformat()
    try:
        parsed = dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidRequest("date: expected YYYY-MM-DD") from None
    if parsed.isoformat() != value:
        raise InvalidRequest("date: expected YYYY-MM-DD")
    return value


def partner_ref(value: str) -> str:
    """A stable opaque reference: 1-64 printable ASCII characters, no spaces, not an e-mail address."""
    if not value:
        raise InvalidCustomerRef("X-Partner-Customer-Ref: must not be empty")
    if len(value) > MAX_PARTNER_REF:
        raise InvalidCustomerRef(f"X-Partner-Customer-Ref: at most {MAX_PARTNER_REF} characters")
    if any(c.isspace() for c in value):
        raise InvalidCustomerRef("X-Partner-Customer-Ref: must not contain spaces")
    if not _PRINTABLE_ASCII.match(value):
        raise InvalidCustomerRef("X-Partner-Customer-Ref: only printable ASCII characters are allowed")
    if _LOOKS_LIKE_EMAIL.match(value):
        raise InvalidCustomerRef(
            "X-Partner-Customer-Ref: must not be an e-mail address; use your own opaque customer id"
        )
    return value

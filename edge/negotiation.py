"""Header checks every request goes through: Accept, Content-Type, Idempotency-Key,
X-Partner-Customer-Ref. Pure; each raises EdgeError naming the header."""

from __future__ import annotations

import re

from edge.exceptions import EdgeError

MAX_IDEMPOTENCY_KEY = 255
MAX_CUSTOMER_REF = 64
_JSON_RANGES = {"application/json", "application/*", "*/*"}
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def accepts_json(accept: str | None) -> bool:
    """Whether an Accept header admits application/json (no header admits everything)."""
    if accept is None or not accept.strip():
        return True
    return any(q > 0 for media, q in _qualities(accept).items() if media in _JSON_RANGES)


def _qualities(accept: str) -> dict[str, float]:
    """The media ranges of an Accept header with their q values."""
    out: dict[str, float] = {}
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        out[media.lower()] = max(q, out.get(media.lower(), 0.0))
    return out


def prefers_csv(accept: str | None) -> bool:
    """Whether an Accept header asks for text/csv (named with q > 0) at least as much as for JSON (the
    routes that offer CSV: GET /v1/usage, /v1/usage/webhooks)."""
    if not accept or "csv" not in accept.lower():
        return False
    q = _qualities(accept)
    csv = q.get("text/csv", 0.0)
    return csv > 0 and csv >= q.get("application/json", 0.0)


def check_accept(accept: str | None) -> None:
    if not accepts_json(accept):
        raise EdgeError(
            f"the Accept header {accept!r} excludes application/json, the only type this API returns",
            type="not_acceptable",
        )


def check_json_content_type(content_type: str | None) -> None:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise EdgeError(
            f"the Content-Type header must be application/json, not {content_type or 'missing'!r}",
            type="unsupported_media_type",
        )


def check_idempotency_key(value: str | None) -> str:
    """1 to 255 printable ASCII characters (decisions.md "Idempotency")."""
    if value is None:
        raise EdgeError(
            "every POST needs an Idempotency-Key header (1 to 255 printable ASCII characters)",
            type="missing_idempotency_key",
        )
    if not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY or not all(" " <= c <= "~" for c in value):
        raise EdgeError(
            "the Idempotency-Key header must be 1 to 255 printable ASCII characters",
            type="invalid_request",
        )
    return value


def check_customer_ref(value: str | None, source: str = "X-Partner-Customer-Ref") -> str:
    """The partner's opaque traveller reference: not empty, at most 64 printable ASCII characters,
    no spaces, not an e-mail address (spec.md "Traveller record"). ``source`` names where it came from
    (the header, or the path parameter of DELETE /v1/customers/{ref}), so the message blames the right one."""
    if value is None or value == "":
        raise EdgeError(f"{source} is empty", type="invalid_customer_ref")
    if len(value) > MAX_CUSTOMER_REF:
        raise EdgeError(
            f"{source} is longer than {MAX_CUSTOMER_REF} characters",
            type="invalid_customer_ref",
        )
    if not all("!" <= c <= "~" for c in value):
        raise EdgeError(f"{source} must be printable ASCII with no spaces", type="invalid_customer_ref")
    if _EMAIL.fullmatch(value):
        raise EdgeError(
            f"{source} must be an opaque reference, not an e-mail address",
            type="invalid_customer_ref",
        )
    return value

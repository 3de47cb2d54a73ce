"""Where the API key comes from: ``Authorization: Svc <key>`` (``Bearer`` alias) or, on the
WebSocket handshake, ``Sec-WebSocket-Protocol: svc, <key>`` (decisions.md "Names and wire formats")."""

from __future__ import annotations

from edge.exceptions import EdgeError
from svckit.apikeys import environment_of

SCHEMES = ("svc", "bearer")
WS_PROTOCOL = "svc"


def _check_shape(key: str) -> str:
    """Prefix, length, alphabet and checksum, checked here so that a typo or a made-up key costs no
    call to authsvc (and no cache entry); authsvc decides the rest (existence, status)."""
    if environment_of(key) is None:
        raise EdgeError("the API key is malformed, unknown, revoked or expired", type="invalid_api_key")
    return key


def key_from_authorization(value: str | None) -> str:
    """The key of an Authorization header value; raises missing_api_key or invalid_api_key."""
    if value is None or not value.strip():
        raise EdgeError("no API key: send the header 'Authorization: Svc <API_KEY>'", type="missing_api_key")
    scheme, _, rest = value.strip().partition(" ")
    if scheme.lower() not in SCHEMES:
        raise EdgeError(
            "the Authorization header must be 'Svc <API_KEY>' (or 'Bearer <API_KEY>')",
            type="invalid_api_key",
        )
    key = rest.strip()
    if not key:
        raise EdgeError("no API key: send the header 'Authorization: Svc <API_KEY>'", type="missing_api_key")
    return _check_shape(key)


def key_from_subprotocols(value: str | None) -> str | None:
    """The key of a ``Sec-WebSocket-Protocol`` header (``svc, <key>``), or None when the header is absent.

    A header that offers protocols but not ``svc`` is invalid_request; ``svc`` alone is missing_api_key.
    """
    if value is None:
        return None
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if not entries:
        return None
    if entries[0].lower() != WS_PROTOCOL:
        raise EdgeError(
            "Sec-WebSocket-Protocol must be 'svc, <API_KEY>': the first protocol must be 'svc'",
            type="invalid_request",
        )
    if len(entries) < 2:
        raise EdgeError("no API key: send 'Sec-WebSocket-Protocol: svc, <API_KEY>'", type="missing_api_key")
    if len(entries) > 2:
        raise EdgeError(
            "Sec-WebSocket-Protocol must have exactly two entries: 'svc, <API_KEY>'",
            type="invalid_request",
        )
    return _check_shape(entries[1])

"""Where the API key comes from: ``Authorization: Svc <key>`` (``Bearer`` alias) or, on the
WebSocket handshake, ``Sec-WebSocket-Protocol: svc, <key>`` (decisions.md "Names and wire formats")."""

from __future__ import annotations

from collections.abc import Sequence

from edge.exceptions import EdgeError
from edge.sources import list_entries
from svckit.apikeys import INVALID_API_KEY_MESSAGE, environment_of

SCHEMES = ("svc", "bearer")
WS_PROTOCOL = "svc"


def _check_shape(key: str) -> str:
    """Prefix, length, alphabet and checksum, checked here so that a typo or a made-up key costs no
    call to authsvc (and no cache entry); authsvc decides the rest (existence, status)."""
    if environment_of(key) is None:
        raise EdgeError(INVALID_API_KEY_MESSAGE, type="invalid_api_key")
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


def stream_credential(subprotocol_lines: Sequence[str], authorization: str | None) -> tuple[str, str | None]:
    """The key of a ``/v1/stream`` handshake and the subprotocol its answer selects.

    ``Sec-WebSocket-Protocol: svc, <key>`` (the header's lines joined in order, as the WebSocket
    handshake itself reads them): the key is the second entry, and the answer selects the first exactly as
    the client spelt it -- the name is matched case-insensitively here, and a client accepts only a
    protocol it offered, byte for byte. ``svc`` alone takes the key from Authorization; no header at
    all does too and selects no subprotocol (server clients that can send headers). A protocol list not
    starting with ``svc``, or longer than two, is invalid_request.
    """
    entries = list_entries(subprotocol_lines)
    if not entries:
        return key_from_authorization(authorization), None
    if entries[0].lower() != WS_PROTOCOL:
        raise EdgeError(
            "Sec-WebSocket-Protocol must be 'svc, <API_KEY>': the first protocol must be 'svc'",
            type="invalid_request",
        )
    if len(entries) > 2:
        raise EdgeError(
            "Sec-WebSocket-Protocol must have exactly two entries: 'svc, <API_KEY>'",
            type="invalid_request",
        )
    if len(entries) == 1:
        if authorization is None:
            raise EdgeError(
                "no API key: send 'Sec-WebSocket-Protocol: svc, <API_KEY>' or 'Authorization: Svc <API_KEY>'",
                type="missing_api_key",
            )
        return key_from_authorization(authorization), entries[0]
    return _check_shape(entries[1]), entries[0]

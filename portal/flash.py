"""One-time messages carried from a form's POST to the page it redirects to (Post/Redirect/Get): a notice
("Endpoint saved", "3 deliveries queued") or a secret to show once (a new key's secret).

The portal holds no data and may run as several processes, so a flash travels in a cookie, sealed:
AES-256-GCM under a key derived with HKDF-SHA256 from the portal's CSRF key (so every portal process
sharing that key opens it), the SHA-256 of the session token as associated data (a cookie of another
session does not open), an expiry inside the sealed payload (``TTL``), and the cookie itself HttpOnly,
SameSite=Strict, Secure on https, scoped to the one page that shows it, and deleted by the answer that
shows it. Pure functions of the key, no I/O; ``portal.web`` sets and reads the cookies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import time
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# How long a flash waits for its page: the redirect follows at once, so minutes are plenty.
TTL = 600
NOTICE_COOKIE = "portal_notice"
SECRET_COOKIE = "portal_once"
_INFO = b"portal-flash/v1"
_NONCE = 12


def flash_key(csrf_key: bytes) -> bytes:
    """The flash key: HKDF-SHA256 of the CSRF key, domain-separated (never the CSRF key itself)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(csrf_key)


def _aad(session_token: str, cookie: str) -> bytes:
    return _INFO + b"\x00" + cookie.encode() + b"\x00" + hashlib.sha256(session_token.encode()).digest()


def seal(
    key: bytes,
    session_token: str,
    cookie: str,
    payload: dict[str, Any],
    now: float | None = None,
    ttl: int = TTL,
) -> str:
    """``payload`` sealed for ``session_token`` and the cookie ``cookie``, valid ``ttl`` seconds."""
    body = json.dumps({**payload, "exp": int((now or time.time()) + ttl)}, separators=(",", ":")).encode()
    nonce = os.urandom(_NONCE)
    sealed = nonce + AESGCM(key).encrypt(nonce, body, _aad(session_token, cookie))
    return base64.urlsafe_b64encode(sealed).decode().rstrip("=")


def unseal(
    key: bytes, session_token: str, cookie: str, value: str, now: float | None = None
) -> dict[str, Any] | None:
    """The payload of ``value``; None when it is not one this key sealed for this session and cookie,
    was changed, or has expired."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) <= _NONCE:
        return None
    try:
        body = AESGCM(key).decrypt(raw[:_NONCE], raw[_NONCE:], _aad(session_token, cookie))
        payload = json.loads(body)
    except (InvalidTag, ValueError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("exp"), int):
        return None
    if payload["exp"] < (now or time.time()):
        return None
    return payload

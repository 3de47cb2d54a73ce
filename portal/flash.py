"""One-time messages carried from a form's POST to the page it redirects to (Post/Redirect/Get): a notice
("Endpoint saved", "3 deliveries queued") or a secret to show once (a new key's secret).

The portal holds no data and may run as several processes, so a flash travels in a cookie, sealed:
AES-256-GCM under a key derived with HKDF-SHA256 from the portal's CSRF key (so every portal process
sharing that key opens it), the SHA-256 of the session token as associated data (a cookie of another
session does not open), an expiry inside the sealed payload (``TTL``), and the cookie itself HttpOnly,
SameSite=Strict, Secure on https, scoped to the one page that shows it, and deleted by the answer that
shows it. Pure functions of the key, no I/O; ``portal.web`` sets and reads the cookies.

A secret's cookie is also *spent* at its first view (``Spent``, issue 34): before, it was single-use only
because browsers delete it, and the same session sending it again within its 10 minutes saw the secret
again. What is remembered is the sealed value's digest and its expiry (never the secret), in the
process that showed it: a replay that reaches another portal process behind a balancer is not known
there (docs/portal.md).
"""

from __future__ import annotations

import base64
import binascii
import collections
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


# Spent cookies remembered at most (each a digest and an expiry: a few MB); past it the oldest go first.
SPENT_MAX = 100_000


def sealed_id(value: str) -> bytes:
    """What identifies one sealed cookie value (its digest: every seal has its own random nonce)."""
    return hashlib.sha256(value.encode()).digest()


class Spent:
    """The sealed cookies already shown, until each expires (its payload's ``exp``); ``now`` passed in."""

    def __init__(self, size: int = SPENT_MAX) -> None:
        self.size = size
        self._until: collections.OrderedDict[bytes, int] = collections.OrderedDict()

    def first_view(self, sealed: bytes, exp: int, now: float) -> bool:
        """True the first time ``sealed`` is shown (it is spent from then on), False after."""
        self._forget_expired(now)
        if sealed in self._until:
            return False
        self._until[sealed] = exp
        if len(self._until) > self.size:
            self._until.popitem(last=False)
        return True

    def _forget_expired(self, now: float) -> None:
        # In the order spent; expiries are TTL after sealing, so nearly in that order too.
        while self._until:
            oldest, exp = next(iter(self._until.items()))
            if exp >= now:
                return
            del self._until[oldest]

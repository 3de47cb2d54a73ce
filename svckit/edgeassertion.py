"""The edge's signed assertion of whom a product request is for: one header, for an upstream that sits
behind a proxy ending TLS and so cannot see the edge's client certificate.

Why: the identity headers (``X-Account-Id``, ``X-Key-Id``, ``X-Environment``) are believable only when the
upstream knows the edge sent them. Mutual TLS proves it on a direct connection; behind a TLS-terminating
proxy the upstream sees the proxy instead, so the edge also signs the identity with its Ed25519 key
(``--upstream-signing-key-file``) and the upstream verifies it with the public key alone: it holds no
secret that could mint an assertion. An assertion is good for ``LIFETIME`` seconds and names the method
and path it was made for, so one taken from a log or a proxy cannot be replayed later or on another
route. ``verify`` is the pure decision (table-tested in tests/unit/test_edge_assertion.py); standard
library and ``cryptography`` only, so a product service needs nothing else.

Format: ``v1.<base64url(JSON claims)>.<base64url(Ed25519 signature of "v1.<claims>")>``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

HEADER = "X-Edge-Assertion"
LIFETIME = 60  # seconds
SKEW = 5  # seconds an assertion may seem to come from the future (clocks differ a little)
MAX_LENGTH = 4096
VERSION = "v1"


@dataclass(frozen=True)
class Claims:
    account: str
    key: str
    environment: str  # live or sandbox
    traveller: str
    request_id: str
    method: str
    path: str
    issued: int  # Unix seconds
    expires: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(private_key: Ed25519PrivateKey, claims: Claims) -> str:
    payload = _b64(json.dumps(asdict(claims), separators=(",", ":"), sort_keys=True).encode())
    signed = f"{VERSION}.{payload}"
    return f"{signed}.{_b64(private_key.sign(signed.encode()))}"


def claims_for(
    account: str,
    key: str,
    environment: str,
    traveller: str,
    request_id: str,
    method: str,
    path: str,
    now: float,
) -> Claims:
    issued = int(now)
    return Claims(account, key, environment, traveller, request_id, method, path, issued, issued + LIFETIME)


def verify(header: str, public_key: Ed25519PublicKey, *, method: str, path: str, now: float) -> Claims | str:
    """The claims of a valid assertion made for ``method`` and ``path``, or why it is refused. Pure."""
    if not header or len(header) > MAX_LENGTH:
        return "missing" if not header else "too long"
    parts = header.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        return "malformed"
    try:
        signature = _unb64(parts[2])
        raw = json.loads(_unb64(parts[1]))
    except (ValueError, UnicodeDecodeError):
        return "malformed"
    try:
        public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode())
    except InvalidSignature:
        return "bad signature"
    try:
        claims = Claims(**raw)
    except TypeError:
        return "malformed"
    if not (isinstance(claims.issued, int) and isinstance(claims.expires, int)):
        return "malformed"
    if claims.expires - claims.issued > LIFETIME:
        return "lives too long"
    if now > claims.expires:
        return "expired"
    if claims.issued > now + SKEW:
        return "issued in the future"
    if (claims.method, claims.path) != (method, path):
        return "made for another request"
    return claims

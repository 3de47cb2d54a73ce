"""The optional asymmetric signature of Standard Webhooks (``v1a``): an ed25519 key pair per signing
secret, made with it and rotated with it (same overlap), its private half sealed at rest with the
secrets (``_secretbox``). Receivers verify with the public half (``whpk_`` + base64 of the 32 raw bytes,
published at GET /v1/webhooks/signing-keys) and need no secret at all.

Formats as the Standard Webhooks spec writes them: ``whsk_`` + base64 of the 32-byte private seed,
``whpk_`` + base64 of the 32-byte public key.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

PRIVATE_PREFIX = "whsk_"
PUBLIC_PREFIX = "whpk_"
_RAW = serialization.Encoding.Raw


def new_signing_key() -> str:
    seed = Ed25519PrivateKey.generate().private_bytes(
        _RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return PRIVATE_PREFIX + base64.b64encode(seed).decode()


@functools.lru_cache(maxsize=4096)
def _key(signing_key: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(base64.b64decode(signing_key.removeprefix(PRIVATE_PREFIX)))


def public_key(signing_key: str) -> str:
    raw = _key(signing_key).public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    return PUBLIC_PREFIX + base64.b64encode(raw).decode()


def signer(signing_key: str) -> Callable[[bytes], bytes]:
    """Signs bytes with the key (the key object is parsed once and kept)."""
    return _key(signing_key).sign

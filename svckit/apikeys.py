"""The API key secret format, shared by authsvc (which issues keys) and the edge (which refuses a
malformed one before asking anybody) -- decisions.md "Names and wire formats".

``svc_live_`` / ``svc_test_`` + 32 base62 random characters (190.5 bits) + a 6-character base62 CRC32 of
everything before it. The checksum is not a secret: it lets a typo, a truncated copy, a scanner hit or a
flood of made-up keys be recognised with no database look-up and no call to authsvc.
"""

from __future__ import annotations

import hmac
import zlib
from typing import Literal

from svckit.ids import BASE62, encode_base62

Environment = Literal["live", "sandbox"]

PREFIXES: dict[Environment, str] = {"live": "svc_live_", "sandbox": "svc_test_"}
PREFIX_LENGTH = 9  # both prefixes
_BY_PREFIX: dict[str, Environment] = {prefix: env for env, prefix in PREFIXES.items()}
RANDOM_LENGTH = 32
CHECKSUM_LENGTH = 6
SECRET_LENGTH = PREFIX_LENGTH + RANDOM_LENGTH + CHECKSUM_LENGTH
_BASE62_SET = frozenset(BASE62)
assert all(len(p) == PREFIX_LENGTH for p in PREFIXES.values())
# The one message of invalid_api_key, whether the key is malformed, unknown, revoked or expired: a caller
# holding a leaked or guessed key learns nothing about which keys exist or once did (docs/authentication.md).
INVALID_API_KEY_MESSAGE = "Invalid API key provided."


def checksum(body: str) -> str:
    return encode_base62(zlib.crc32(body.encode("ascii")), CHECKSUM_LENGTH)


def environment_of(secret: str) -> Environment | None:
    """The environment of a well-formed secret (prefix, length, alphabet, checksum), else None."""
    if len(secret) != SECRET_LENGTH:
        return None
    env = _BY_PREFIX.get(secret[:PREFIX_LENGTH])
    if env is None:
        return None
    if not _BASE62_SET.issuperset(secret[PREFIX_LENGTH:]):
        return None
    body, check = secret[:-CHECKSUM_LENGTH], secret[-CHECKSUM_LENGTH:]
    if not hmac.compare_digest(checksum(body), check):
        return None
    return env

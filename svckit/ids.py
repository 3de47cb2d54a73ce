"""Prefixed random ids (decisions.md: acct_, key_, we_, evt_, msg_, att_, req_, trv_)."""

from __future__ import annotations

import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def random_base62(length: int) -> str:
    """Uniform base62 string from one draw of random bytes (rejection sampling, no modulo bias)."""
    space = 62**length
    nbytes = (space.bit_length() + 7) // 8 + 1
    limit = (256**nbytes // space) * space
    while True:
        value = int.from_bytes(secrets.token_bytes(nbytes), "big")
        if value < limit:
            return encode_base62(value % space, length)


def new_id(prefix: str, length: int = 24) -> str:
    """``prefix`` + ``_`` + ``length`` base62 characters (24 chars ~ 143 bits)."""
    return f"{prefix}_{random_base62(length)}"


def encode_base62(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, rem = divmod(value, 62)
        chars.append(BASE62[rem])
    return "".join(reversed(chars))

"""Prefixed random ids (decisions.md: acct_, key_, we_, evt_, msg_, att_, req_, trv_)."""

from __future__ import annotations

import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def random_base62(length: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(length))


def new_id(prefix: str, length: int = 24) -> str:
    """``prefix`` + ``_`` + ``length`` base62 characters (24 chars ~ 143 bits)."""
    return f"{prefix}_{random_base62(length)}"


def encode_base62(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, rem = divmod(value, 62)
        chars.append(BASE62[rem])
    return "".join(reversed(chars))

"""Prefixed ids (decisions.md: acct_, key_, we_, evt_, msg_, att_, req_, trv_).

``new_id`` is 24 random base62 characters (~143 bits). ``sortable_id`` is for rows written at a high rate
(events, deliveries, attempts): 8 characters of milliseconds since the epoch, then 16 random ones (~95
bits), like Svix's KSUID-based ids. Ids made later sort later, so the primary-key index grows at its end
instead of touching a random page per insert.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase

# Random bytes below 248 (= 4 * 62) map uniformly onto the 62 symbols; the others are dropped.
_UNIFORM = 4 * 62
_TO_BASE62 = bytes(ord(BASE62[b % 62]) if b < _UNIFORM else 0 for b in range(256))
_DROP = bytes(range(_UNIFORM, 256))
_fast = random.Random()
TIME_CHARS = 8  # 62**8 ms reach past the year 8000


def random_base62(length: int) -> str:
    """Uniform base62 string from the OS's random source (rejection sampling, no modulo bias)."""
    out = b""
    while len(out) < length:
        out += os.urandom(length + length // 8 + 4).translate(_TO_BASE62, _DROP)
    return out[:length].decode("ascii")


def new_id(prefix: str, length: int = 24) -> str:
    """``prefix`` + ``_`` + ``length`` random base62 characters."""
    return f"{prefix}_{random_base62(length)}"


def new_request_id() -> str:
    """``req_`` + 24 hex characters (96 bits; hex is a subset of the base62 alphabet). A request id is an
    identifier, not a secret: a fast PRNG is enough and keeps it off the per-request syscall path."""
    return f"req_{_fast.getrandbits(96):024x}"


def sortable_id(prefix: str, now: dt.datetime, length: int = 24) -> str:
    """``prefix`` + ``_`` + the time ``now`` in ms (8 chars) + random base62 characters, ``length`` in all."""
    ms = int(now.timestamp() * 1000)
    return f"{prefix}_{encode_base62(ms, TIME_CHARS)}{random_base62(length - TIME_CHARS)}"


def encode_base62(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, rem = divmod(value, 62)
        chars.append(BASE62[rem])
    return "".join(reversed(chars))

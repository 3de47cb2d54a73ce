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
from collections.abc import Callable, Iterator

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase

# Random bytes below 248 (= 4 * 62) map uniformly onto the 62 symbols; the others are dropped.
_UNIFORM = 4 * 62
_TO_BASE62 = bytes(ord(BASE62[b % 62]) if b < _UNIFORM else 0 for b in range(256))
_DROP = bytes(range(_UNIFORM, 256))
_fast = random.Random()
TIME_CHARS = 8  # 62**8 ms reach past the year 8000
SORTABLE_RANDOM = 16  # random characters of a default-length sortable id


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


BATCH = 256


class Batched:
    """Strings handed out one at a time from lists ``make(size)`` makes ``size`` at a time: one draw of
    random bits and one formatting pass serve ``size`` ids, where one id drawn and formatted alone cost
    thousands of instructions (a request id, a span id, a webhook attempt's id around every send). ``next``
    on a list iterator hands each string out once, whatever the thread; a forked child drops the parent's
    undrawn ones (``make``'s generator, if it has one, is the caller's to reseed at fork)."""

    def __init__(self, make: Callable[[int], list[str]], size: int = BATCH) -> None:
        self._make = make
        self._size = size
        self._left: Iterator[str] = iter(())
        _BATCHED.append(self)

    def take(self) -> str:
        found = next(self._left, "")
        if not found:
            self._left = iter(self._make(self._size))
            found = next(self._left)
        return found

    def drop(self) -> None:
        self._left = iter(())


_BATCHED: list[Batched] = []


def _drop_batches() -> None:
    for batched in _BATCHED:
        batched.drop()


os.register_at_fork(after_in_child=_drop_batches)


def _sortable_tails(count: int) -> list[str]:
    chars = random_base62(SORTABLE_RANDOM * count)
    return [chars[at : at + SORTABLE_RANDOM] for at in range(0, len(chars), SORTABLE_RANDOM)]


# A sortable id's random part comes from one syscall per BATCH ids, and its time part is encoded once per
# millisecond.
_tails = Batched(_sortable_tails)
_last_ms: tuple[int, str] = (-1, "")


def _random_tail(length: int) -> str:
    return _tails.take() if length == SORTABLE_RANDOM else random_base62(length)


def sortable_id(prefix: str, now: dt.datetime, length: int = 24) -> str:
    """``prefix`` + ``_`` + the time ``now`` in ms (8 chars) + random base62 characters, ``length`` in all."""
    global _last_ms
    ms = int(now.timestamp() * 1000)
    last = _last_ms
    if last[0] != ms:
        last = _last_ms = (ms, encode_base62(ms, TIME_CHARS))
    return f"{prefix}_{last[1]}{_random_tail(length - TIME_CHARS)}"


def encode_base62(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, rem = divmod(value, 62)
        chars.append(BASE62[rem])
    return "".join(reversed(chars))

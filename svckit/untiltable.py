"""A bounded table of source -> the time until which it still matters (a GCRA bucket's theoretical arrival
time, a trust's end), as the rate limits and the connection guard keep them.

An entry whose time has passed is the same as no entry (a full bucket is a bucket never used), so it is
forgotten first; when the table is full of live entries the least recently used one makes room, never
the whole table: a flood of new sources cannot wipe the state of the ones already held back.
cachetools' TLRUCache does exactly that (expired first, then least recently used).
"""

from __future__ import annotations

from collections.abc import Callable

from cachetools import TLRUCache


def _until(_key: str, until: float, _now: float) -> float:
    return until


def until_table(maxsize: int, clock: Callable[[], float]) -> TLRUCache[str, float]:
    """At most ``maxsize`` entries of source -> until (``clock``'s time); an entry stored with an until
    already past is not kept."""
    return TLRUCache(maxsize, ttu=_until, timer=clock)

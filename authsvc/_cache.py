"""In-process cache of key grants by secret hash, invalidated on every key or account change.

A generation counter prevents a look-up that started before an invalidation from storing the
stale result after it. Entries also age out after ``ttl`` seconds as a safety net. At ``max_entries``
the least recently used grant makes room (cachetools' TTLCache), not the whole cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cachetools import TTLCache

from authsvc._model import KeyChange, KeyGrant


class KeyCache:
    def __init__(
        self, ttl: float = 60.0, max_entries: int = 10_000, timer: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: TTLCache[str, KeyGrant] = TTLCache(max_entries, ttl, timer=timer)
        self.generation = 0
        self.hits = 0
        self.misses = 0

    def get(self, secret_hash: str) -> KeyGrant | None:
        grant = self._entries.get(secret_hash)
        if grant is None:
            self.misses += 1
            return None
        self.hits += 1
        return grant

    def put(self, secret_hash: str, grant: KeyGrant, generation: int) -> None:
        if generation != self.generation:
            return
        self._entries[secret_hash] = grant

    def invalidate(self, change: KeyChange) -> None:
        self.generation += 1
        if change.kind == "sync":  # the watch reconnected: any change may have been missed
            self._entries.clear()
            return
        for h, grant in list(self._entries.items()):
            if (change.key_id and grant.key.id == change.key_id) or (
                change.kind == "account_updated" and grant.account.id == change.account_id
            ):
                self._entries.pop(h, None)

    def __len__(self) -> int:
        return len(self._entries)

"""In-process cache of key grants by secret hash, invalidated on every key or account change.

A generation counter prevents a look-up that started before an invalidation from storing the
stale result after it. Entries also age out after ``ttl`` seconds as a safety net.
"""

from __future__ import annotations

import time

from authsvc._model import KeyChange, KeyGrant


class KeyCache:
    def __init__(self, ttl: float = 60.0, max_entries: int = 10_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: dict[str, tuple[KeyGrant, float]] = {}
        self.generation = 0
        self.hits = 0
        self.misses = 0

    def get(self, secret_hash: str) -> KeyGrant | None:
        entry = self._entries.get(secret_hash)
        if entry is None or time.monotonic() - entry[1] > self.ttl:
            self.misses += 1
            return None
        self.hits += 1
        return entry[0]

    def put(self, secret_hash: str, grant: KeyGrant, generation: int) -> None:
        if generation != self.generation:
            return
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[secret_hash] = (grant, time.monotonic())

    def invalidate(self, change: KeyChange) -> None:
        self.generation += 1
        if change.kind == "sync":
            self._entries.clear()
            return
        for h, (grant, _) in list(self._entries.items()):
            if (change.key_id and grant.key.id == change.key_id) or (
                change.kind == "account_updated" and grant.account.id == change.account_id
            ):
                del self._entries[h]

    def __len__(self) -> int:
        return len(self._entries)

"""The authorisation cache: authsvc's answers kept for their cache_ttl (at most 60 s, never past the
key's expiry), dropped by key or account on WatchKeyChanges, flushed on SYNC. Pure: callers pass the
monotonic ``now`` (and wall-clock time for key expiry).

Answers about a known key (allows, and refusals such as missing_scope) are indexed by key and account.
Denials of unknown keys have no key to index them by and are what a flood of made-up keys produces: they
live apart, in a least-recently-used table of fixed size, so a flood evicts only other such denials and
never an allow."""

from __future__ import annotations

import datetime as dt
import enum
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_TTL = 60.0
# A watch stream that heartbeats and has been silent this long counts as broken from then on (seconds).
WATCH_SILENCE = 0.5
# How long after the watch broke a cached answer may still stand in for an authsvc that cannot be reached.
# With WATCH_SILENCE, no cached answer is served more than a second after the watch was last heard from,
# so a key revoked the moment the watch went quiet is still refused within the spec's second.
WATCH_GRACE = 0.5
# A watch that heartbeats and has been silent this long is torn down and opened anew (seconds). Shorter
# silences only stop the cache answering first (WATCH_SILENCE): the stream itself is kept, as heartbeats
# held up behind a flood on the edge still arrive, in order, and a reconnect's SYNC empties the cache.
WATCH_RECONNECT = 5.0
# Denials of unknown keys kept at most (least recently used evicted first); --denial-cache-size.
DENIAL_CACHE_SIZE = 10_000
# How long after the watch told of a change to a key or account no answer about it is kept, and a key heard
# revoked is refused whatever authsvc answers (seconds): as long as any authsvc process may still answer
# from what it knew before the change (its own caches keep nothing longer than MAX_TTL). The edge watches
# one authsvc and asks any: the one it asks may hear of a revocation made on another process later than
# the one it watches does (each hears it from PostgreSQL's NOTIFY, in its own time), and an ALLOW it gave
# in between, kept for its TTL, would outlive the only drop the watch sends.
HOLD = MAX_TTL
# Keys and accounts held at most (the oldest let go first): changes are operators' and partners' acts.
MAX_HELD = 100_000


@dataclass(frozen=True, slots=True)
class Caller:
    """What the edge knows about an authorised key and its account."""

    key_id: str
    account_id: str
    environment: str
    scopes: tuple[str, ...]
    key_status: str
    key_hint: str = ""
    expires_at: dt.datetime | None = None
    account_name: str = ""
    account_mode: str = ""
    account_status: str = ""
    daily_search_allowance: int = 0
    # The key's own requests/s limit; 0: its environment's (EdgeConfig.rate_limit_live/_sandbox).
    rate_limit: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    # The certification run open for this very key ("" none) and its end (unix seconds): edge.certification.
    cert_run_id: str = ""
    cert_run_ends: float = 0.0


@dataclass(frozen=True, slots=True)
class Answer:
    allowed: bool
    error_type: str = ""
    error_message: str = ""
    caller: Caller | None = None


class CacheUse(enum.Enum):
    FIRST = "first"  # a cached answer is served without asking authsvc
    FALLBACK = "fallback"  # authsvc is asked; a cached answer only if authsvc cannot be reached
    NEVER = "never"  # authsvc is asked; if it cannot be reached: 503, whatever is cached


def cache_use(
    down_since: float | None,
    now: float,
    heard: float | None = None,
    *,
    silence: float = WATCH_SILENCE,
    grace: float = WATCH_GRACE,
) -> CacheUse:
    """When the cache may answer, given since when (monotonic) no WatchKeyChanges stream has been
    connected (None: one is, and its SYNC arrived) and, for a stream that heartbeats, when it was last
    heard from (None: it does not heartbeat).

    The cache is only as fresh as the watch that drops revoked keys from it. With the watch up it answers
    first. Once the watch broke -- or went silent for longer than ``silence``, as a stream over a dead
    network does long before TCP notices -- a revocation may be happening unheard: authsvc is asked every
    time, and a cached answer stands in for an unreachable authsvc only for ``grace`` seconds. After
    that the edge fails closed (503 service_unavailable) rather than serve an allow nobody can vouch for.
    Since the edge was started counts as "broke" (no watch yet).
    """
    if heard is not None and now - heard > silence:
        quiet_since = heard + silence
        down_since = quiet_since if down_since is None else min(down_since, quiet_since)
    if down_since is None:
        return CacheUse.FIRST
    if now - down_since <= grace:
        return CacheUse.FALLBACK
    return CacheUse.NEVER


@dataclass(slots=True)
class _Entry:
    answer: Answer
    expires: float


def ttl_for(answer_ttl: float, key_expires_at: dt.datetime | None, wall_now: dt.datetime) -> float:
    """Seconds an answer may be cached: authsvc's TTL, capped at 60 s and at the key's expiry."""
    ttl = min(max(answer_ttl, 0.0), MAX_TTL)
    if key_expires_at is not None:
        ttl = min(ttl, (key_expires_at - wall_now).total_seconds())
    return max(ttl, 0.0)


@dataclass
class AuthCache:
    max_entries: int = 100_000
    max_denials: int = DENIAL_CACHE_SIZE
    _entries: dict[tuple[object, ...], _Entry] = field(default_factory=dict)
    _denials: OrderedDict[tuple[object, ...], _Entry] = field(default_factory=OrderedDict)
    _by_key: dict[str, set[tuple[object, ...]]] = field(default_factory=dict)
    _by_account: dict[str, set[tuple[object, ...]]] = field(default_factory=dict)
    # Bumped by every drop or flush: an answer fetched before a drop is never stored after it.
    generation: int = 0
    # ("key" | "account" | "revoked", id) -> monotonic time until which it is held (see HOLD), oldest first.
    _held: OrderedDict[tuple[str, str], float] = field(default_factory=OrderedDict)

    def hold(self, kind: str, ident: str, now: float) -> None:
        """From ``now`` for HOLD seconds: no answer about key or account ``ident`` is stored (``kind`` "key"
        or "account"), or, for "revoked", key ``ident`` is refused (``revoked``) as well."""
        held = self._held
        held.pop((kind, ident), None)
        held[(kind, ident)] = now + HOLD
        while held and (len(held) > MAX_HELD or next(iter(held.values())) <= now):
            held.popitem(last=False)

    def _is_held(self, kind: str, ident: str, now: float) -> bool:
        until = self._held.get((kind, ident))
        return until is not None and now < until

    def revoked(self, key_id: str, now: float) -> bool:
        """Whether the watch told of ``key_id``'s revocation less than HOLD seconds ago."""
        return self._is_held("revoked", key_id, now)

    def get(self, k: tuple[object, ...], now: float) -> Answer | None:
        entry = self._entries.get(k)
        if entry is None:
            entry = self._denials.get(k)
            if entry is None:
                return None
            self._denials.move_to_end(k)
        if entry.expires <= now:
            self._remove(k)
            return None
        return entry.answer

    def put(self, k: tuple[object, ...], answer: Answer, ttl: float, now: float, generation: int) -> bool:
        """Store unless ``ttl`` is 0 or something was dropped since ``generation`` was read."""
        if ttl <= 0 or generation != self.generation:
            return False
        c = answer.caller
        if c is not None and (
            self._is_held("key", c.key_id, now)
            or self._is_held("revoked", c.key_id, now)
            or self._is_held("account", c.account_id, now)
        ):
            return False
        if answer.caller is None:
            self._remove(k)
            if self.max_denials <= 0:
                return False
            self._denials[k] = _Entry(answer, now + ttl)
            while len(self._denials) > self.max_denials:
                self._denials.popitem(last=False)
            return True
        if len(self._entries) >= self.max_entries and k not in self._entries:
            self.flush_expired(now)
            if len(self._entries) >= self.max_entries:
                return False
        self._remove(k)
        self._entries[k] = _Entry(answer, now + ttl)
        if answer.caller is not None:
            self._by_key.setdefault(answer.caller.key_id, set()).add(k)
            self._by_account.setdefault(answer.caller.account_id, set()).add(k)
        return True

    def _remove(self, k: tuple[object, ...]) -> None:
        self._denials.pop(k, None)
        entry = self._entries.pop(k, None)
        if entry is None or entry.answer.caller is None:
            return
        c = entry.answer.caller
        for index, ident in ((self._by_key, c.key_id), (self._by_account, c.account_id)):
            keys = index.get(ident)
            if keys is not None:
                keys.discard(k)
                if not keys:
                    del index[ident]

    def drop_key(self, key_id: str) -> int:
        self.generation += 1
        keys = list(self._by_key.get(key_id, ()))
        for k in keys:
            self._remove(k)
        return len(keys)

    def drop_account(self, account_id: str) -> int:
        self.generation += 1
        keys = list(self._by_account.get(account_id, ()))
        for k in keys:
            self._remove(k)
        return len(keys)

    def flush(self) -> None:
        self.generation += 1
        self._entries.clear()
        self._denials.clear()
        self._by_key.clear()
        self._by_account.clear()

    def flush_expired(self, now: float) -> None:
        for k in [k for k, e in self._entries.items() if e.expires <= now]:
            self._remove(k)

    @property
    def denials(self) -> int:
        """Denials of unknown keys held (never more than ``max_denials``)."""
        return len(self._denials)

    def __len__(self) -> int:
        return len(self._entries) + len(self._denials)

"""Budgets of look-ups of keys authsvc does not know: per source, per network block, and for the whole
edge. Pure: callers pass monotonic microseconds.

A well-formed key (right prefix, valid CRC) the cache has never seen costs a call to authsvc and an
indexed read there. Made-up keys of valid CRC are cheap to produce and each misses the cache, so a flood
of them would make authsvc slow for everyone, a partner's first use of a real key included. An attacker
also has many addresses (an IPv6 /64 holds 2**64; a botnet or a cloud range many IPv4s), so one budget
per address is not enough. Three tiers, each a GCRA (edge.gcra):

- **source**: the address (an IPv6 address by its /64, the block one subscriber holds), ``rate`` a
  second with a burst of ``burst``;
- **block**: its IPv4 /24 or IPv6 /48, ``block_share`` times that (looser: a block may hold several
  tenants);
- **global**: every source together, ``global_share`` times that: what the edge spends on unknown keys
  at most, whatever the number of addresses.

A cache miss takes a place in each tier *before* authsvc is asked (so a thousand concurrent misses from a
thousand addresses cannot all pass a check made before any was charged) and gives it back when the
answer named a key (or authsvc could not answer): only keys authsvc does not know are paid for. A source
whose key was allowed in the last ``known_ttl`` seconds is a **known source** (a partner's host): it is
held to its own source budget only, so when anonymous addresses spend the block or global budget, known
sources' first uses of new keys, and every cached key, go on as before. A miss past a budget is answered
429 ``rate_limited`` with Retry-After (never 401: the key may be real) without asking authsvc.

Each table holds at most ``max_sources`` entries (least recently used forgotten first: a forgotten entry
starts again with a full budget, or as not known, so the bound is on memory, never on the rest).
"""

from __future__ import annotations

import asyncio
import enum
from collections import OrderedDict
from dataclasses import dataclass, field

from edge.authcache import Answer
from edge.gcra import US, Limit, gcra
from svckit.netblocks import buckets

# Unknown keys a second per source, and how many at once (EdgeConfig.unknown_key_rate / _burst): far
# more than a partner mistyping keys, a small share of what one authsvc answers.
UNKNOWN_KEY_RATE = 20.0
UNKNOWN_KEY_BURST = 100
# The block (IPv4 /24, IPv6 /48) and global budgets, as multiples of the source budget.
BLOCK_SHARE = 1.5
GLOBAL_SHARE = 2.0
# How long a source whose key was allowed stays known (seconds): longer than a cached answer lives
# (edge.authcache.MAX_TTL), so a partner's steady traffic keeps its hosts known.
KNOWN_TTL = 3600.0
MAX_SOURCES = 100_000


class Tier(enum.StrEnum):
    SOURCE = "source"
    BLOCK = "block"
    GLOBAL = "global"


_ORDER = {tier: i for i, tier in enumerate(Tier)}  # narrowest first
MESSAGES = {
    Tier.SOURCE: "Too many unknown API keys from this address",
    Tier.BLOCK: "Too many unknown API keys from this network",
    Tier.GLOBAL: "Too many unknown API keys are being tried right now",
}


def tiers_of(known_source: bool) -> tuple[Tier, ...]:
    """The budgets a cache miss is held to: a known source (one of its keys allowed lately) only its own,
    so a flood from anonymous addresses spending the block or global budget never reaches it."""
    return (Tier.SOURCE,) if known_source else (Tier.SOURCE, Tier.BLOCK, Tier.GLOBAL)


def refusal(waits: dict[Tier, int]) -> tuple[Tier, int] | None:
    """The tier that refuses a miss and the microseconds until it may be asked (the longest wait of
    those that refuse, the narrowest tier first on a tie), or None when every tier has room."""
    refusing = [(wait, -_ORDER[tier], tier) for tier, wait in waits.items() if wait > 0]
    if not refusing:
        return None
    wait, _, tier = max(refusing)
    return tier, wait


@dataclass(frozen=True, slots=True)
class Ticket:
    """A cache miss admitted: the places it took (tier, bucket), given back unless the key is unknown."""

    source: str
    taken: tuple[tuple[Tier, str], ...]


@dataclass(frozen=True, slots=True)
class Refused:
    tier: Tier
    retry_after: int  # microseconds

    @property
    def message(self) -> str:
        return f"{MESSAGES[self.tier]}; retry after {max(1, -(-self.retry_after // US))} s."


@dataclass
class UnknownKeyBudget:
    rate: float = UNKNOWN_KEY_RATE
    burst: int = UNKNOWN_KEY_BURST
    block_share: float = BLOCK_SHARE
    global_share: float = GLOBAL_SHARE
    known_ttl: float = KNOWN_TTL
    max_sources: int = MAX_SOURCES
    _tats: dict[Tier, OrderedDict[str, int]] = field(
        default_factory=lambda: {tier: OrderedDict() for tier in Tier}
    )
    _known: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _limits: dict[Tier, Limit] = field(default_factory=dict)

    def limit(self, tier: Tier) -> Limit:
        got = self._limits.get(tier)
        if got is None:
            share = {Tier.SOURCE: 1.0, Tier.BLOCK: self.block_share, Tier.GLOBAL: self.global_share}[tier]
            period = max(1, round(US / (self.rate * share)))
            got = self._limits[tier] = Limit(period, period * max(1, round(self.burst * share)))
        return got

    def _buckets(self, source: str) -> dict[Tier, str]:
        own, block = buckets(source)
        return {Tier.SOURCE: own, Tier.BLOCK: block, Tier.GLOBAL: ""}

    def known(self, source: str, now: int) -> bool:
        return self._known_bucket(buckets(source)[0], now)

    def _known_bucket(self, own: str, now: int) -> bool:
        seen = self._known.get(own)
        return seen is not None and now - seen < self.known_ttl * US

    def admit(self, source: str, now: int) -> Ticket | Refused:
        """A place in every budget ``source``'s cache miss is held to, or the refusal."""
        names = self._buckets(source)
        tiers = tiers_of(self._known_bucket(names[Tier.SOURCE], now))
        verdicts = {tier: gcra(self._tats[tier].get(names[tier]), now, self.limit(tier)) for tier in tiers}
        refused = refusal({tier: v.retry_after for tier, v in verdicts.items() if not v.allowed})
        if refused is not None:
            return Refused(*refused)
        for tier, verdict in verdicts.items():
            assert verdict.tat is not None
            self._store(self._tats[tier], names[tier], verdict.tat)
        return Ticket(source, tuple((tier, names[tier]) for tier in tiers))

    def settle(self, ticket: Ticket, now: int, answer: Answer | None) -> None:
        """The answer to an admitted miss (None: authsvc gave none). A key it named gives the places
        back (an allowed one makes its source known); an unknown key keeps them, and is charged to the
        block and global budgets too when its known source was not held to them."""
        if answer is None or answer.caller is not None:
            for tier, name in ticket.taken:
                self._give_back(tier, name, now)
            if answer is not None and answer.allowed:
                self._store(self._known, buckets(ticket.source)[0], now)
            return
        names = self._buckets(ticket.source)
        held = {tier for tier, _ in ticket.taken}
        for tier in Tier:
            if tier not in held:
                self.charge(tier, names[tier], now)

    def charge(self, tier: Tier, name: str, now: int) -> None:
        """One unknown key in ``tier``'s bucket ``name``, if it has room (a spent one is not overdrawn)."""
        verdict = gcra(self._tats[tier].get(name), now, self.limit(tier))
        if verdict.allowed and verdict.tat is not None:
            self._store(self._tats[tier], name, verdict.tat)

    def _give_back(self, tier: Tier, name: str, now: int) -> None:
        table = self._tats[tier]
        tat = table.get(name)
        if tat is None:
            return
        tat -= self.limit(tier).period
        if tat <= now:
            del table[name]  # a full budget again, the same as never seen
        else:
            table[name] = tat

    def _store(self, table: OrderedDict[str, int], name: str, value: int) -> None:
        table[name] = value
        table.move_to_end(name)
        while len(table) > self.max_sources:
            table.popitem(last=False)

    def __len__(self) -> int:
        return len(self._tats[Tier.SOURCE])


def got(task: asyncio.Future[Answer]) -> Answer | None:
    """The answer of a finished look-up, None when it failed or was cancelled."""
    if task.cancelled() or task.exception() is not None:
        return None
    return task.result()

"""Pure: which claimed delivery may start its send now, and which deliveries the next claim skips.

The delivery worker holds these budgets, all counted in sends in flight (docs/webhooks.md, "Isolation"):

- an environment's pool: ``live`` and ``sandbox`` are separate budgets, so sandbox traffic never takes a
  live send slot;
- an endpoint's cap (``per_endpoint``): one endpoint's slow or hanging sends hold at most that many slots;
- an account's share (``account_share`` of its environment's pool, so always less than the pool: others
  keep the rest) and the retries' share (``retry_share``), so one account cannot hold the pool and first
  attempts are never starved by retries;
- probation: sends to an endpoint not *proven* (it has not answered a send of this process within
  ``slow_after``, or its last send went slow) hold at most ``probation_share`` (half) of its account's
  share, so an account's endpoints that answer keep the other half however many of its new endpoints
  hang (until one has hung for ``slow_after`` nothing tells it from a healthy one);
- a slow lane per account: a send still running ``slow_after`` seconds after it started (an endpoint that
  accepts and never answers) leaves its pool slot, its account's share and probation for its account's
  place in the slow lane (``slow`` per environment, of which one account holds at most its
  ``account_share``: one account's hanging sends never take another's places); it still counts on its
  endpoint's cap, and its endpoint gets no further send until its slow ones end. Past its account's
  places a slow send keeps its slot, which only its own account's probation misses.

``admit`` decides for one claim given the sends in flight: SEND, WAIT (only its environment's pool is
full: it keeps its place, the pool is moving) or DEFER (a cap of its own is full: it is held back apart
and, if it waits too long, handed back to the queue unsent, due when it was due). ``skips`` names, from the
claims a worker holds (in flight and waiting), what its next claim leaves in the table: an endpoint, an
account (or an account's unproven endpoints) or the sandbox that already has its fill is not claimed again
until it has room, so deliveries of others behind them are reached.
"""

from __future__ import annotations

import collections
import enum
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from svckit.vocabulary import Environment

T = TypeVar("T")
LIVE, SANDBOX = str(Environment.LIVE), str(Environment.SANDBOX)


class Verdict(enum.Enum):
    SEND = "send"
    WAIT = "wait"  # its environment's pool is full: keeps its place in the ready queue
    DEFER = "defer"  # its endpoint, account or the retries are at their cap (or the sandbox pool is full)


@dataclass(frozen=True, slots=True)
class Budgets:
    """Sends in flight (each stated once, on ``WorkerConfig``)."""

    live: int
    sandbox: int
    per_endpoint: int
    account_share: float
    retry_share: float
    slow: int  # sends per environment that ran past ``slow_after`` and left their pool slot
    probation_share: float  # the most of an account's share its unproven endpoints hold

    def pool(self, env: str) -> int:
        return self.sandbox if env == SANDBOX else self.live

    def slow_cap(self, env: str) -> int:
        """The most slow sends moved out of ``env``'s pool; past it a slow send keeps its slot."""
        return self.slow

    def slow_account_cap(self, env: str) -> int:
        """One account's places in ``env``'s slow lane: its share of it, so others keep the rest."""
        return max(1, math.ceil(self.slow_cap(env) * self.account_share))

    def account_cap(self, env: str) -> int:
        """One account's most sends in flight in ``env``: its share of the pool (the sandbox's 8: 4), so
        another account always has room (before issue 34 never less than one endpoint's cap, which made
        one account's share the whole sandbox pool)."""
        return max(1, math.ceil(self.pool(env) * self.account_share))

    def probation_cap(self, env: str) -> int:
        """One account's most sends in flight in ``env`` to endpoints not proven: ``probation_share`` of
        its share (half: the sandbox's 2, live's 16)."""
        return max(1, math.floor(self.account_cap(env) * self.probation_share))

    def retry_cap(self, env: str) -> int:
        """Most retries (attempt 2 and later) in flight in ``env``."""
        return max(1, math.ceil(self.pool(env) * self.retry_share))


@dataclass(frozen=True, slots=True)
class Key:
    """What admission knows of a claim."""

    env: str
    account: str
    endpoint: str
    retry: bool  # not its first attempt
    proven: bool = True  # its endpoint answered its last send within ``slow_after``


@dataclass(slots=True)
class Counts:
    """Sends (or claims) counted per environment, account, endpoint, and retries per environment; and of
    them the slow ones (a send running past ``slow_after``), per environment and account."""

    env: collections.Counter[str] = field(default_factory=collections.Counter)
    account: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    endpoint: collections.Counter[str] = field(default_factory=collections.Counter)
    retry: collections.Counter[str] = field(default_factory=collections.Counter)
    slow_env: collections.Counter[str] = field(default_factory=collections.Counter)
    slow_account: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    slow_endpoint: collections.Counter[str] = field(default_factory=collections.Counter)
    unproven: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    slow_unproven: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)

    def fresh(self, env: str) -> int:
        return self.env[env] - self.slow_env[env]

    def fresh_account(self, env: str, account: str) -> int:
        return self.account[env, account] - self.slow_account[env, account]

    def fresh_unproven(self, env: str, account: str) -> int:
        return self.unproven[env, account] - self.slow_unproven[env, account]

    def mark_slow(self, key: Key) -> None:
        self.slow_env[key.env] += 1
        self.slow_account[key.env, key.account] += 1
        self.slow_endpoint[key.endpoint] += 1
        if not key.proven:
            self.slow_unproven[key.env, key.account] += 1

    def unmark_slow(self, key: Key) -> None:
        _drop(self.slow_env, key.env)
        _drop(self.slow_account, (key.env, key.account))
        _drop(self.slow_endpoint, key.endpoint)
        if not key.proven:
            _drop(self.slow_unproven, (key.env, key.account))

    def add(self, key: Key, n: int = 1) -> None:
        self.env[key.env] += n
        self.account[key.env, key.account] += n
        self.endpoint[key.endpoint] += n
        if key.retry:
            self.retry[key.env] += n
        if not key.proven:
            self.unproven[key.env, key.account] += n

    def remove(self, key: Key) -> None:
        _drop(self.env, key.env)
        _drop(self.account, (key.env, key.account))
        _drop(self.endpoint, key.endpoint)
        if key.retry:
            _drop(self.retry, key.env)
        if not key.proven:
            _drop(self.unproven, (key.env, key.account))

    @classmethod
    def of(cls, keys: list[Key]) -> Counts:
        counts = cls()
        for key in keys:
            counts.add(key)
        return counts


def _drop(counter: collections.Counter[T], k: T) -> None:
    counter[k] -= 1
    if counter[k] <= 0:
        del counter[k]


def admit(key: Key, inflight: Counts, budgets: Budgets) -> Verdict:
    """May a claim with ``key`` start its send, given the sends ``inflight``?"""
    if inflight.endpoint[key.endpoint] >= budgets.per_endpoint or inflight.slow_endpoint[key.endpoint]:
        return Verdict.DEFER  # at its cap, or it hangs: no more sends until its slow ones end
    if inflight.fresh_account(key.env, key.account) >= budgets.account_cap(key.env):
        return Verdict.DEFER
    if not key.proven and inflight.fresh_unproven(key.env, key.account) >= budgets.probation_cap(key.env):
        return Verdict.DEFER  # its account's endpoints that answer keep the rest of its share
    if key.retry and inflight.retry[key.env] >= budgets.retry_cap(key.env):
        return Verdict.DEFER
    if inflight.fresh(key.env) >= budgets.pool(key.env):
        # A full live pool is the normal pipeline (it drains at the pool's pace); sandbox claims never sit
        # in the ready queue where they would keep live claims out.
        return Verdict.DEFER if key.env == SANDBOX else Verdict.WAIT
    return Verdict.SEND


def answered_in_time(status: int | None, seconds: float, slow_after: float) -> bool:
    """Does a finished send prove its endpoint (its next sends out of probation)? It got an HTTP answer
    (any status: an endpoint that answers 500 at once holds nothing) within ``slow_after`` seconds; no
    answer (refused, reset, timed out) or a late one puts the endpoint back in probation."""
    return bool(status) and seconds < slow_after


def may_go_slow(key: Key, inflight: Counts, budgets: Budgets) -> bool:
    """May a send with ``key`` that ran past ``slow_after`` leave its pool slot for the slow lane? While
    its environment's lane and its account's places in it have room (so one account's hanging sends
    never fill another's places; past them a slow send keeps its slot, in its own account's share)."""
    return inflight.slow_env[key.env] < budgets.slow_cap(key.env) and inflight.slow_account[
        key.env, key.account
    ] < budgets.slow_account_cap(key.env)


@dataclass(frozen=True, slots=True)
class Skips:
    """What a claim leaves in the table: JSON arrays, one statement parameter each (``_queue_sql``), and where
    its walk of the due rows starts."""

    endpoints: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()  # "environment:account"
    environments: tuple[str, ...] = ()
    retries_in: tuple[str, ...] = ()  # environments whose retries are skipped (first attempts still claimed)
    # "environment:account" whose deliveries are skipped but those of its ``proven`` endpoints (probation
    # is full: only its endpoints that answer are claimed)
    probation: tuple[str, ...] = ()
    proven: tuple[str, ...] = ()  # endpoints of the ``probation`` accounts still claimed
    # Rows due at or before this (µs) were walked by a claim skipping as much that left them all: only what
    # came due later is looked at (``webhookd._claim_walks``); -1, every due row. Not a skip of its own.
    after: int = -1
    # (endpoint id, ordering key) of the ordered deliveries the worker's last results finished: the next of
    # each is claimed by name (the key's head), as the walk would have found it. Not a skip of its own.
    freed: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.endpoints or self.accounts or self.environments or self.retries_in or self.probation)

    def params(self) -> tuple[str, str, str, str, str, str, int, str]:
        return (
            json.dumps(self.endpoints),
            json.dumps(self.accounts),
            json.dumps(self.environments),
            json.dumps(self.retries_in),
            json.dumps(self.probation),
            json.dumps(self.proven),
            self.after,
            json.dumps(self.freed),
        )


NO_SKIPS = Skips()


def skips(
    held: Counts,
    budgets: Budgets,
    breaker_open: Collection[str] = (),
    proven: Mapping[str, Collection[str]] | None = None,
) -> Skips:
    """From the claims a worker holds (sending or waiting): what already has its fill, in sorted order;
    and the endpoints whose circuit breaker holds their deliveries back (``webhookd._breaker``).
    ``proven``: the proven endpoints by "environment:account".

    An account is skipped when its proven claims and its probation's fill reach its share (unproven
    claims held past probation's fill, a claim's overshoot, wait for their turn and do not keep its
    proven endpoints out); its unproven endpoints alone when probation has its fill; the sandbox when
    what its accounts hold within those caps fills its pool (one account's overshoot does not keep
    another account's sandbox deliveries out: issue 34)."""
    full = {e for e, n in held.endpoint.items() if n >= budgets.per_endpoint or held.slow_endpoint[e]}
    accounts, probation = set(), set()
    sandbox = 0  # the sandbox claims held that its pool can send (each account's within its caps)
    for e, a in held.account:
        fresh_unproven = held.fresh_unproven(e, a)
        counted = held.fresh_account(e, a) - fresh_unproven + min(fresh_unproven, budgets.probation_cap(e))
        if counted >= budgets.account_cap(e):
            accounts.add(f"{e}:{a}")
        elif fresh_unproven >= budgets.probation_cap(e):
            probation.add(f"{e}:{a}")
        if e == SANDBOX:
            sandbox += min(counted, budgets.account_cap(e))
    kept = tuple(sorted(ep for acct in probation for ep in (proven or {}).get(acct, ())))
    return Skips(
        endpoints=tuple(sorted(full.union(breaker_open))),
        accounts=tuple(sorted(accounts)),
        environments=(SANDBOX,) if sandbox >= budgets.sandbox else (),
        retries_in=tuple(sorted(env for env, n in held.retry.items() if n >= budgets.retry_cap(env))),
        probation=tuple(sorted(probation)),
        proven=kept,
    )


def covers(skipped: Skips, found_nothing: Skips) -> bool:
    """Pure: whether a claim skipping ``skipped`` leaves in the table all that a claim skipping
    ``found_nothing`` left (each skip only takes candidates away). Then, if that claim found nothing, this
    one finds nothing either until something new comes due: it is not run (``_found_nothing``), and a claim
    that skipped less and found something says nothing about it. Without this, every claim that found
    something forgot it, and a worker holding its fill of one endpoint with a long backlog walked that
    whole backlog again after each of its claims (on PostgreSQL, half the claims' time in a 40,000
    burst to one endpoint)."""
    return (
        set(skipped.endpoints) >= set(found_nothing.endpoints)
        and set(skipped.accounts) >= set(found_nothing.accounts)
        and set(skipped.environments) >= set(found_nothing.environments)
        and set(skipped.retries_in) >= set(found_nothing.retries_in)
        and set(skipped.probation) | set(skipped.accounts) >= set(found_nothing.probation)
        # a proven endpoint ``skipped`` claims that ``found_nothing`` did not may be one more candidate (if
        # ``found_nothing`` skipped its account: not known here, so any account skipped counts)
        and (
            set(skipped.proven) <= set(found_nothing.proven) | set(skipped.endpoints)
            or not (found_nothing.probation or found_nothing.accounts)
        )
    )

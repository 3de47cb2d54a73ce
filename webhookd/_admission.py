"""Pure: which claimed delivery may start its send now, and which deliveries the next claim skips.

The delivery worker holds three kinds of budget, all counted in sends in flight (docs/webhooks.md,
"Isolation"):

- an environment's pool: ``live`` and ``sandbox`` are separate budgets, so sandbox traffic never takes a
  live send slot;
- an endpoint's cap (``per_endpoint``): one endpoint's slow or hanging sends hold at most that many slots;
- an account's share (``account_share`` of its environment's pool) and the retries' share
  (``retry_share``), so one account cannot hold the pool and first attempts are never starved by retries;
- a slow lane: a send still running ``slow_after`` seconds after it started (an endpoint that accepts and
  never answers) leaves its pool slot and its account's share for the ``slow`` budget (it still counts on
  its endpoint's cap), and its endpoint gets no further send until its slow ones end; so hanging
  endpoints, however many, keep healthy ones waiting at most ``slow_after``, not for their timeouts.

``admit`` decides for one claim given the sends in flight: SEND, WAIT (only its environment's pool is
full: it keeps its place, the pool is moving) or DEFER (a cap of its own is full: it is held back apart
and, if it waits too long, handed back to the queue unsent, due when it was due). ``skips`` names, from the
claims a worker holds (in flight and waiting), what its next claim leaves in the table: an endpoint, an
account or the sandbox that already has its fill is not claimed again until it has room, so deliveries of
others behind them are reached.
"""

from __future__ import annotations

import collections
import enum
import json
import math
from collections.abc import Collection
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
    slow: int  # live sends that ran past ``slow_after`` and left their pool slot (the sandbox: its pool)

    def pool(self, env: str) -> int:
        return self.sandbox if env == SANDBOX else self.live

    def slow_cap(self, env: str) -> int:
        """The most slow sends moved out of ``env``'s pool; past it a slow send keeps its slot."""
        return self.sandbox if env == SANDBOX else self.slow

    def account_cap(self, env: str) -> int:
        """One account's most sends in flight in ``env``: its share of the pool, never less than one
        endpoint's cap (a small pool is not split below what a single endpoint may use)."""
        return max(self.per_endpoint, math.ceil(self.pool(env) * self.account_share))

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

    def fresh(self, env: str) -> int:
        return self.env[env] - self.slow_env[env]

    def fresh_account(self, env: str, account: str) -> int:
        return self.account[env, account] - self.slow_account[env, account]

    def mark_slow(self, key: Key) -> None:
        self.slow_env[key.env] += 1
        self.slow_account[key.env, key.account] += 1
        self.slow_endpoint[key.endpoint] += 1

    def unmark_slow(self, key: Key) -> None:
        _drop(self.slow_env, key.env)
        _drop(self.slow_account, (key.env, key.account))
        _drop(self.slow_endpoint, key.endpoint)

    def add(self, key: Key, n: int = 1) -> None:
        self.env[key.env] += n
        self.account[key.env, key.account] += n
        self.endpoint[key.endpoint] += n
        if key.retry:
            self.retry[key.env] += n

    def remove(self, key: Key) -> None:
        _drop(self.env, key.env)
        _drop(self.account, (key.env, key.account))
        _drop(self.endpoint, key.endpoint)
        if key.retry:
            _drop(self.retry, key.env)

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
    if key.retry and inflight.retry[key.env] >= budgets.retry_cap(key.env):
        return Verdict.DEFER
    if inflight.fresh(key.env) >= budgets.pool(key.env):
        # A full live pool is the normal pipeline (it drains at the pool's pace); sandbox claims never sit
        # in the ready queue where they would keep live claims out.
        return Verdict.DEFER if key.env == SANDBOX else Verdict.WAIT
    return Verdict.SEND


@dataclass(frozen=True, slots=True)
class Skips:
    """What a claim leaves in the table: JSON arrays, one statement parameter each (``_queue_sql``)."""

    endpoints: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()  # "environment:account"
    environments: tuple[str, ...] = ()
    retries_in: tuple[str, ...] = ()  # environments whose retries are skipped (first attempts still claimed)

    def __bool__(self) -> bool:
        return bool(self.endpoints or self.accounts or self.environments or self.retries_in)

    def params(self) -> tuple[str, str, str, str]:
        return (
            json.dumps(self.endpoints),
            json.dumps(self.accounts),
            json.dumps(self.environments),
            json.dumps(self.retries_in),
        )


NO_SKIPS = Skips()


def skips(held: Counts, budgets: Budgets, breaker_open: Collection[str] = ()) -> Skips:
    """From the claims a worker holds (sending or waiting): what already has its fill, in sorted order;
    and the endpoints whose circuit breaker holds their deliveries back (``webhookd._breaker``)."""
    full = {e for e, n in held.endpoint.items() if n >= budgets.per_endpoint or held.slow_endpoint[e]}
    return Skips(
        endpoints=tuple(sorted(full.union(breaker_open))),
        accounts=tuple(
            sorted(
                f"{e}:{a}" for (e, a) in held.account if held.fresh_account(e, a) >= budgets.account_cap(e)
            )
        ),
        environments=(SANDBOX,) if held.fresh(SANDBOX) >= budgets.sandbox else (),
        retries_in=tuple(sorted(env for env, n in held.retry.items() if n >= budgets.retry_cap(env))),
    )

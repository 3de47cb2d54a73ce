"""A circuit breaker per endpoint, as one pure decision (no I/O, ``now`` passed in).

Why: an endpoint that does not answer at all (connections refused or reset, TLS or DNS failing, every send
timing out) costs a send slot for up to the whole delivery timeout on each of its due deliveries, and the
retry schedule alone would keep sending every one of them. After ``threshold`` consecutive sends ended
without any HTTP response the breaker opens: the endpoint's due deliveries wait, unsent, with no attempt
counted and still due (the worker's claims skip the endpoint, as they skip one at its in-flight cap), and
one of them goes as a probe once per ``interval``. Any HTTP response (a 500 too: the endpoint answers, the
retry schedule deals with its status) closes it again, and the waiting deliveries are claimed at once.

State lives in each worker process (``Breakers``); several processes each probe on their own. A test
send is never held back; its result counts like any other.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from svckit.vocabulary import AttemptOutcome

# What counts against an endpoint: the send got no HTTP response at all.
UNANSWERED = frozenset({AttemptOutcome.NETWORK_ERROR, AttemptOutcome.TIMEOUT})


class State(enum.Enum):
    CLOSED = "closed"  # sending
    OPEN = "open"  # waiting for the next probe
    PROBING = "probing"  # one probe out (half-open)


class Verdict(enum.Enum):
    SEND = "send"
    PROBE = "probe"  # send it: its outcome opens or closes the breaker
    WAIT = "wait"  # do not send; due again at ``Gate.until``


@dataclass(frozen=True, slots=True)
class Settings:
    threshold: int = 5
    interval: dt.timedelta = dt.timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Breaker:
    state: State = State.CLOSED
    failures: int = 0  # consecutive unanswered sends
    until: dt.datetime | None = None  # OPEN: the next probe; PROBING: when a lost probe is given up


CLOSED = Breaker()


@dataclass(frozen=True, slots=True)
class Gate:
    verdict: Verdict
    breaker: Breaker
    until: dt.datetime | None = None  # WAIT: when a probe may go next


def admit(b: Breaker, now: dt.datetime, s: Settings) -> Gate:
    """May a due delivery of this endpoint be sent now?"""
    if b.state is State.CLOSED:
        return Gate(Verdict.SEND, b)
    assert b.until is not None
    if now >= b.until:  # time for a probe (or the last probe never reported: send another)
        return Gate(Verdict.PROBE, Breaker(State.PROBING, b.failures, now + s.interval))
    return Gate(Verdict.WAIT, b, b.until)


def record(b: Breaker, outcome: AttemptOutcome, now: dt.datetime, s: Settings) -> Breaker:
    """The breaker after a send to the endpoint ended with ``outcome``."""
    if outcome not in UNANSWERED:
        return CLOSED
    failures = b.failures + 1
    if b.state is State.OPEN:  # a send that started before it opened: the probe time stays
        return Breaker(State.OPEN, failures, b.until)
    if b.state is State.PROBING or failures >= s.threshold:
        return Breaker(State.OPEN, failures, now + s.interval)
    return Breaker(State.CLOSED, failures)


class Breakers:
    """Every endpoint's breaker in this process (closed ones with no failure are not kept)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._by_endpoint: dict[str, Breaker] = {}

    def tracked(self, endpoint_id: str) -> bool:
        """False: closed with no failure (the fast path: nothing to ask or record but failures)."""
        return endpoint_id in self._by_endpoint

    def state(self, endpoint_id: str) -> Breaker:
        return self._by_endpoint.get(endpoint_id, CLOSED)

    def admit(self, endpoint_id: str, now: dt.datetime) -> Gate:
        gate = admit(self.state(endpoint_id), now, self.settings)
        self._keep(endpoint_id, gate.breaker)
        return gate

    def record(self, endpoint_id: str, outcome: AttemptOutcome, now: dt.datetime) -> Breaker:
        b = record(self.state(endpoint_id), outcome, now, self.settings)
        self._keep(endpoint_id, b)
        return b

    def waiting(self, now: dt.datetime) -> set[str]:
        """The endpoints whose deliveries a claim leaves in the table now: open until a later probe
        time, or with a probe out."""
        return {
            e
            for e, b in self._by_endpoint.items()
            if b.state is not State.CLOSED and b.until is not None and now < b.until
        }

    def _keep(self, endpoint_id: str, b: Breaker) -> None:
        if b == CLOSED:
            self._by_endpoint.pop(endpoint_id, None)
        else:
            self._by_endpoint[endpoint_id] = b

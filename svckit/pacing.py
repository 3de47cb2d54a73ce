"""Refusal pacing (a tarpit): a client refused again and again gets its next refusals later.

Why: a refused request costs the server nearly what an answered one does (its head parsed, routed, an
error body written), and the refusal tells a flooding client at once to send the next one. A flood of
401s and 429s (made-up keys, sign-ins past their limit, streams past their caps) was answered as fast
as the server could, on the loop and the cores the partners' own requests use (issue 20). So past a
free allowance a refusal is held: written ``delay`` seconds later, its connection not read meanwhile
(the server reads a connection's next request only once this one is answered). A client flooding over N
connections then gets about N refusals a delay beyond the allowance (at most ``burst``, below), however
fast it sends; a client
that made a mistake (a mistyped key, a limit met now and then) stays within the allowance and is
answered at once. Others do the same: HAProxy's ``http-request tarpit``, Postfix's
``smtpd_error_sleep_time`` (1 s), OWASP's progressive delays for failed sign-ins.

Which answers (``paced``): every 429, and every refusal (4xx) of a request with no accepted credential
(no valid key at the edge, no session at the portal). An accepted caller's other refusals (400, 403,
404, ...) are not: they are its own business, and its rate limit holds their number already.

The allowance is two GCRA buckets (svckit.gcra): the source's (svckit.netblocks: an address, an IPv6
/64), ``rate`` a second in bursts of ``burst``, and everyone's, GLOBAL_SHARE times that. A refusal that
takes from both is answered at once (``NOW``); past either it is held (``LATER``). How long
(``hold_seconds``): ``delay``, or longer when its source has many held already, so that a source's held
refusals come back at most ``burst`` per ``delay`` however many connections it floods over (the n-th
held waits ceil(n / burst) delays), up to LONGEST_HOLD. Past ``held_most`` (HELD_MOST) refusals held
in all, a refusal is answered at once and its connection closed (``CLOSE``): memory stays bounded
whatever the number of connections, and a client past the bound pays a new connection for each
further refusal. ``pace`` and ``hold_seconds`` are the rules, pure; ``RefusalPacer`` keeps the buckets
and the held counts of one process, and ``refusal`` applies them to a Sanic answer (the edge's error
handler and the portal's response middleware call it).
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import functools
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter
from sanic import Request
from sanic.http import Http

from svckit.flags import FlagParser, add_flag, env_name
from svckit.gcra import take
from svckit.netblocks import buckets
from svckit.untiltable import until_table

# How long a paced refusal is held (seconds; 0 switches pacing off), and the refusals a source is
# answered at once: RATE a second in bursts of BURST. Far above a partner's mistakes, far below a flood.
DELAY = 1.0
RATE = 20.0
BURST = 40
# Everyone's allowance, as a multiple of one source's: an attacker with many addresses is held to it.
GLOBAL_SHARE = 5.0
# Refusals held at once in all (past it: answered at once, the connection closed), and the longest hold.
HELD_MOST = 4096
LONGEST_HOLD = 10.0
MAX_TRACKED = 100_000

PACED = Counter(
    "refusals_paced_total",
    "Refusals past the free allowance of their source or of everyone: held (later) or answered at once "
    "with the connection closed (close, too many held already)",
    ["pace"],
)


class Pace(enum.StrEnum):
    NOW = "now"  # within the allowance: answered at once
    LATER = "later"  # held for the delay, then answered
    CLOSE = "close"  # past the allowance with too many held: answered at once, connection closed


def paced(status: int, accepted: bool) -> bool:
    """Does this answer count against the allowance: a 429, or any 4xx of a request with no accepted
    credential. Server errors never do (the fault is ours)."""
    return status == 429 or (not accepted and 400 <= status < 500)


def pace(allowed: bool, held_total: int, held_most: int = HELD_MOST) -> Pace:
    """A refusal's pace: ``allowed`` when both the source's and everyone's bucket had room for it;
    ``held_total`` is the number of refusals held right now."""
    if allowed:
        return Pace.NOW
    if held_total >= held_most:
        return Pace.CLOSE
    return Pace.LATER


def hold_seconds(held_by_source: int, delay: float, burst: int, longest: float = LONGEST_HOLD) -> float:
    """How long the ``held_by_source``-th refusal its source has held (itself included) waits: a
    ``delay`` for each ``burst`` of them (so its source's held refusals come back ``burst`` per delay,
    whatever its number of connections), at most ``longest``."""
    return min(longest, delay * max(1, math.ceil(held_by_source / max(1, burst))))


@dataclass(frozen=True, slots=True)
class Pacing:
    """A server's pacing settings (the edge's and the portal's ``pacing``; ``add_pacing_args``' flags):
    the hold, the allowance per source (a second, at once) and the most refusals held at once."""

    delay: float = DELAY
    rate: float = RATE
    burst: int = BURST
    held: int = HELD_MOST


def add_pacing_args(parser: FlagParser, service: str, unaccepted: str) -> None:
    """``--refusal-delay``, ``--refusal-rate``, ``--refusal-burst`` and ``--refusals-held``, each with an
    environment fallback ``<SERVICE>_<FLAG>`` and ``Pacing``'s default; ``unaccepted`` says which requests
    are refused without a credential ("an accepted key", "a session")."""
    defaults = Pacing()
    flags: list[tuple[str, type, float | int, str]] = [
        (
            "refusal-delay",
            float,
            defaults.delay,
            "seconds a refusal past its client address's allowance is held before it is answered "
            f"(a 429, or any refusal without {unaccepted}; 0: none held)",
        ),
        (
            "refusal-rate",
            float,
            defaults.rate,
            "refusals per client address a second answered at once (the rest held --refusal-delay)",
        ),
        ("refusal-burst", int, defaults.burst, "refusals per client address answered at once in a burst"),
        (
            "refusals-held",
            int,
            defaults.held,
            "refusals held at once, at most (past it one is answered at once and its connection closed)",
        ),
    ]
    for name, kind, default, help_text in flags:
        add_flag(parser, f"--{name}", env=env_name(service, name), type=kind, default=default, help=help_text)


def pacing_from_args(args: argparse.Namespace) -> Pacing:
    return Pacing(args.refusal_delay, args.refusal_rate, args.refusal_burst, args.refusals_held)


class RefusalPacer:
    """The allowance buckets and held refusals of one process. ``verdict`` decides (and reserves a held
    place for ``LATER``); ``hold`` then waits the delay and frees the place."""

    def __init__(
        self,
        settings: Pacing = Pacing(),
        *,
        clock: Callable[[], float] = time.monotonic,
        spread: Callable[[], float] = functools.partial(random.uniform, 0.5, 1.5),
        max_tracked: int = MAX_TRACKED,
    ) -> None:
        self.delay, self.clock, self.spread, self.max_tracked = settings.delay, clock, spread, max_tracked
        self.held_most = settings.held
        rate, burst = settings.rate, settings.burst
        self.period = 1.0 / rate if rate > 0 else 0.0
        self.burst = burst
        self.everyone_period = self.period / GLOBAL_SHARE
        self.everyone_burst = round(burst * GLOBAL_SHARE)
        self.everyone: float | None = None
        self.tats = until_table(max_tracked, clock)
        self.held: dict[str, int] = {}
        self.held_total = 0

    def verdict(self, address: str) -> Pace:
        """One paced refusal from ``address``: NOW (counted in the allowance), LATER (a held place
        reserved: ``hold`` must follow) or CLOSE."""
        if self.delay <= 0 or self.period <= 0:
            return Pace.NOW
        source = buckets(address)[0]
        now = self.clock()
        mine = take(self.tats.get(source), now, self.period, self.burst)
        everyone = take(self.everyone, now, self.everyone_period, self.everyone_burst)
        verdict = pace(mine.allowed and everyone.allowed, self.held_total, self.held_most)
        if verdict is Pace.NOW:  # all or nothing: a held refusal takes from neither bucket
            self._store(source, mine.tat)
            self.everyone = everyone.tat
            return verdict
        PACED.labels(verdict).inc()
        if verdict is Pace.LATER:
            self.held[source] = self.held.get(source, 0) + 1
            self.held_total += 1
        return verdict

    def refusal(
        self, request: Request[Any, Any], source: str, status: int, accepted: bool
    ) -> Awaitable[None] | None:
        """What a server's answer of ``status`` to ``request`` from ``source`` waits before it is written:
        None, nothing (not paced, or within the allowance; a CLOSE verdict ends the connection after it);
        else ``hold``'s wait."""
        if self.delay <= 0 or not paced(status, accepted):
            return None
        verdict = self.verdict(source)
        if verdict is Pace.LATER:
            return self.hold(source)
        if verdict is Pace.CLOSE and isinstance(request.stream, Http):
            request.stream.keep_alive = False
        return None

    async def hold(self, address: str) -> None:
        """Wait out a LATER verdict's hold (``hold_seconds``), spread over half to one and a half of it
        (refusals held together would otherwise come back together, a burst once a delay); its held place
        is freed even if the wait is cancelled (the client went away)."""
        source = buckets(address)[0]
        seconds = hold_seconds(self.held.get(source, 1), self.delay, self.burst)
        try:
            await asyncio.sleep(seconds * self.spread())
        finally:
            left = self.held.get(source, 1) - 1
            if left > 0:
                self.held[source] = left
            else:
                self.held.pop(source, None)
            self.held_total -= 1

    def _store(self, source: str, tat: float | None) -> None:
        if tat is not None:  # (svckit.untiltable: full buckets forgotten first, then the least recently used)
            self.tats[source] = tat

"""Connection limits: how many connections a client may hold open, and how long an anonymous one lives.

Why: a server's one event loop serves every open connection. A client with no credential at all (made-up
keys whose checksum is wrong never reach authsvc; nothing is paced per connection) could open thousands
of keep-alive connections from many loopback or neighbouring addresses and send on each of them back
to back: the loop then spent its time on them, and every partner's request, cached keys included, waited
seconds behind the flood (issue 34). Refusal pacing (svckit.pacing) holds refusals per address; it does
not bound the number of connections. These rules do, at accept time, before a byte is read:

- ``admit``: a connection from a source (an address, an IPv6 /64: svckit.netblocks) is refused past
  ``per_source`` open from it, or past ``per_block`` from its block (an IPv4 /24, an IPv6 /48), or when
  the process holds ``anonymous_budget`` connections already (the anonymous lane is full), or
  ``budget`` (everyone's). A source that presented an accepted credential recently (an API key at the
  edge, a session at the portal; ``TRUSTED_SECONDS``) is *trusted*: its connections are not counted
  against its block (a partner's servers share a /24 with anyone), its own cap is
  ``TRUSTED_FACTOR`` times larger, and it may use the part of the budget anonymous ones may not. So when
  the process is loaded, anonymous connections are shed first; partners still get in.
- the refusal (``refusal``) is a short answer with ``Connection: close``, written before the request is
  read: 429 for the source's or block's cap (Retry-After), 503 for the budget. It names the limit
  reached; its metric is ``http_connections_refused_total{limit}``. It is held first (``refusal_hold``,
  not read meanwhile), as refusal pacing holds a refused request: each further attempt costs the client
  a handshake and a wait, and the kernel's accept queue holds the rest.
- ``keep_alive``: an anonymous connection (no accepted credential on it, its source not trusted) is
  closed after ``anonymous_keep_alive`` seconds idle rather than the server's keep-alive timeout.
- ``close_after``: an anonymous connection is closed after its first refusal of a request with no
  accepted credential (a made-up key, no session): a flood pays a new connection, and a slot in these
  caps, for each refusal, and cannot stream refusals back to back over one connection.

These are the rules, pure; svckit.connguard keeps the counts of one process and applies them.
"""

from __future__ import annotations

import argparse
import enum
import math
from dataclasses import dataclass

from svckit.flags import FlagParser, add_flag, env_name

# Connections open at once from one source (address, IPv6 /64) and from one block (IPv4 /24, IPv6 /48)
# without an accepted credential; the process's budget, and the part of it anonymous connections may use.
PER_SOURCE = 64
PER_BLOCK = 128
BUDGET = 2048
ANONYMOUS_SHARE = 0.5
# A trusted source's cap, as a multiple of PER_SOURCE (not held to its block's), and how long a source
# stays trusted after it last presented an accepted credential on a new connection.
TRUSTED_FACTOR = 8
TRUSTED_SECONDS = 600.0
MAX_TRUSTED = 100_000
# Seconds an anonymous connection may stay idle between requests (the server's keep-alive otherwise).
ANONYMOUS_KEEP_ALIVE = 2.0
# A refused connection is held (not read) before its answer: HOLD seconds for each HOLD_BURST held from
# its block, at most LONGEST_HOLD (a flood holding thousands retries a few hundred a second at most);
# past REFUSALS_HELD held in all, answered at once.
HOLD = 1.0
HOLD_BURST = 64
LONGEST_HOLD = 30.0
REFUSALS_HELD = 32_768


class Limit(enum.StrEnum):
    """Which limit a new connection met (``OPEN``: none, it is served)."""

    OPEN = "open"
    SOURCE = "address"  # its source's open connections
    BLOCK = "block"  # its block's (anonymous sources only)
    ANONYMOUS = "anonymous"  # the anonymous lane of the budget is full: the process is loaded
    BUDGET = "budget"  # every connection the process serves


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """A server's connection limits (the edge's and the portal's ``connections``; ``add_connection_args``'
    flags). 0 switches a cap off."""

    per_source: int = PER_SOURCE
    per_block: int = PER_BLOCK
    budget: int = BUDGET
    anonymous_keep_alive: float = ANONYMOUS_KEEP_ALIVE

    @property
    def anonymous_budget(self) -> int:
        return int(self.budget * ANONYMOUS_SHARE)


@dataclass(frozen=True, slots=True)
class Open:
    """The connections open now: from the new connection's source, its block, and in all."""

    source: int
    block: int
    total: int


def admit(now_open: Open, trusted: bool, limits: ConnectionLimits) -> Limit:
    """Is a new connection served (``OPEN``) or refused, and by which limit. The budget binds everyone;
    the rest binds anonymous sources, except a trusted source's own (larger) cap."""
    budget = limits.budget
    if budget and now_open.total >= budget:
        return Limit.BUDGET
    if trusted:
        if limits.per_source and now_open.source >= limits.per_source * TRUSTED_FACTOR:
            return Limit.SOURCE
        return Limit.OPEN
    if budget and now_open.total >= limits.anonymous_budget:
        return Limit.ANONYMOUS
    if limits.per_source and now_open.source >= limits.per_source:
        return Limit.SOURCE
    if limits.per_block and now_open.block >= limits.per_block:
        return Limit.BLOCK
    return Limit.OPEN


def refusal(limit: Limit) -> tuple[int, str]:
    """A refused connection's status and message: 429 when the client's own connections are too many
    (it can close some), 503 when the server's are (anyone may retry shortly)."""
    if limit is Limit.SOURCE:
        return 429, "Too many open connections from your address; reuse or close some."
    if limit is Limit.BLOCK:
        return 429, "Too many open connections from your network; reuse or close some."
    if limit is Limit.ANONYMOUS:
        return 503, "The server is busy: connections without an accepted credential are shed; retry shortly."
    return 503, "The server is at its connection limit; retry shortly."


def refusal_hold(held_by_block: int, held_total: int) -> float | None:
    """How long a refused connection is held before its answer, the ``held_by_block``-th its block has
    held (itself included): a flood retrying refused connections at once would otherwise make the server
    accept, answer and close them as fast as it can send them, on the loop everyone's requests share
    (issue 34 measured its retries at 10,000 a second). Held, it waits, and retries at most HOLD_BURST
    per HOLD from a block. None: answer at once (REFUSALS_HELD held already: memory stays bounded)."""
    if held_total >= REFUSALS_HELD:
        return None
    return min(LONGEST_HOLD, HOLD * max(1, math.ceil(held_by_block / HOLD_BURST)))


def keep_alive(accepted: bool, server: float, limits: ConnectionLimits) -> float:
    """How long a connection may stay idle between requests: the server's keep-alive when it is
    accepted (a credential accepted on it, or its source trusted), at most ``anonymous_keep_alive``
    otherwise (0: no shorter)."""
    if accepted or limits.anonymous_keep_alive <= 0:
        return server
    return min(server, limits.anonymous_keep_alive)


def close_after(status: int, request_accepted: bool, connection_accepted: bool) -> bool:
    """Is an anonymous connection closed once this answer is written: a refusal (4xx) of a request with
    no accepted credential, on a connection none was accepted on. An accepted client's refusals (a 404, a
    429 of its key) keep its connection, as any answer does."""
    return not connection_accepted and not request_accepted and 400 <= status < 500


def add_connection_args(parser: FlagParser, service: str) -> None:
    """``--connections``, ``--connections-per-address``, ``--connections-per-block`` and
    ``--anonymous-keep-alive``, each with an environment fallback ``<SERVICE>_<FLAG>`` and
    ``ConnectionLimits``' default."""
    defaults = ConnectionLimits()
    flags: list[tuple[str, type, float | int, str]] = [
        (
            "connections",
            int,
            defaults.budget,
            "connections this process serves at once (past it a new one is answered 503 and closed); "
            "anonymous ones (no accepted credential from their address lately) at most "
            f"{ANONYMOUS_SHARE:g} of it; 0: no limit",
        ),
        (
            "connections-per-address",
            int,
            defaults.per_source,
            "connections open at once from one client address (IPv6: /64) without an accepted credential "
            f"(one with: {TRUSTED_FACTOR} times as many); past it 429 and closed; 0: no limit",
        ),
        (
            "connections-per-block",
            int,
            defaults.per_block,
            "connections open at once from one IPv4 /24 (IPv6: /48) without an accepted credential; "
            "past it 429 and closed; 0: no limit",
        ),
        (
            "anonymous-keep-alive",
            float,
            defaults.anonymous_keep_alive,
            "seconds a connection without an accepted credential may stay idle between requests "
            "(0: the keep-alive timeout)",
        ),
    ]
    for name, kind, default, help_text in flags:
        add_flag(parser, f"--{name}", env=env_name(service, name), type=kind, default=default, help=help_text)


def limits_from_args(args: argparse.Namespace) -> ConnectionLimits:
    return ConnectionLimits(
        args.connections_per_address, args.connections_per_block, args.connections, args.anonymous_keep_alive
    )

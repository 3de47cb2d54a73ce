"""The budgets of unknown-key look-ups (edge.unknownkeys: per source, per block, global), by table, and the
Authorizer in front of a loopback authsvc: past its budget a source's made-up keys are refused 429 without
asking authsvc, while another source, and a real key, are asked about as before; a flood from 200
addresses at once reaches authsvc only within the global budget, and a known partner's first use of a
new key is still served."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from edge.authcache import Answer, Caller
from edge.authorizer import Authorizer
from edge.environments import Environment
from edge.exceptions import RateLimited
from edge.gcra import US
from edge.unknownkeys import Refused, Ticket, Tier, UnknownKeyBudget, refusal, tiers_of
from svckit.clients import AuthClient
from svckit.netblocks import buckets
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc


# -- where an address is counted ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "source", "block"),
    [
        ("198.51.100.7", "198.51.100.7", "198.51.100.0/24"),
        ("::ffff:198.51.100.7", "198.51.100.7", "198.51.100.0/24"),  # IPv4-mapped: as IPv4
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", "2001:db8:1::/48"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64", "2001:db8:1::/48"),  # same /64: one source
        ("2001:db8:1:3::1", "2001:db8:1:3::/64", "2001:db8:1::/48"),  # another /64, same /48
        ("not an address", "not an address", "not an address"),
    ],
)
def test_buckets(address: str, source: str, block: str) -> None:
    assert buckets(address) == (source, block)


# -- which budgets hold a miss, and which refuses ----------------------------------------------------------
@pytest.mark.parametrize(
    ("known", "tiers"),
    [(False, (Tier.SOURCE, Tier.BLOCK, Tier.GLOBAL)), (True, (Tier.SOURCE,))],
)
def test_tiers_of(known: bool, tiers: tuple[Tier, ...]) -> None:
    assert tiers_of(known) == tiers


@pytest.mark.parametrize(
    ("waits", "refused"),
    [
        ({}, None),
        ({Tier.SOURCE: 0, Tier.BLOCK: 0, Tier.GLOBAL: 0}, None),
        ({Tier.SOURCE: 0, Tier.BLOCK: 0, Tier.GLOBAL: 5}, (Tier.GLOBAL, 5)),
        ({Tier.SOURCE: 3, Tier.BLOCK: 0, Tier.GLOBAL: 5}, (Tier.GLOBAL, 5)),  # the longest wait
        ({Tier.SOURCE: 5, Tier.BLOCK: 5, Tier.GLOBAL: 5}, (Tier.SOURCE, 5)),  # tie: the narrowest
        ({Tier.SOURCE: 1, Tier.BLOCK: 9}, (Tier.BLOCK, 9)),
    ],
)
def test_refusal(waits: dict[Tier, int], refused: tuple[Tier, int] | None) -> None:
    assert refusal(waits) == refused


# -- the budget over time ------------------------------------------------------------------------------------
UNKNOWN = Answer(False, "invalid_api_key")
KNOWN_DENIED = Answer(False, "missing_scope", caller=Caller("key_1", "acct_1", "sandbox", (), "active"))
ALLOWED = Answer(True, caller=Caller("key_1", "acct_1", "sandbox", (), "active"))


def misses(budget: UnknownKeyBudget, source: str, n: int, now: int = 0, answer: Answer = UNKNOWN) -> str:
    """``n`` misses from ``source`` at ``now``, each settled by ``answer``: "." admitted, else the
    refusing tier's first letter."""
    out = ""
    for _ in range(n):
        got = budget.admit(source, now)
        if isinstance(got, Refused):
            out += got.tier.value[0]
        else:
            out += "."
            budget.settle(got, now, answer)
    return out


def test_one_source_spends_its_own_budget_then_refills() -> None:
    budget = UnknownKeyBudget(rate=2.0, burst=3, block_share=2.0, global_share=3.0)
    assert misses(budget, "198.51.100.1", 5) == "...ss"
    assert misses(budget, "198.51.100.1", 1, int(0.49 * US)) == "s"
    assert misses(budget, "198.51.100.1", 2, int(0.5 * US)) == ".s"  # one refilled at 2 a second
    assert misses(budget, "198.51.100.2", 3) == "..b"  # a neighbour: its own budget, the /24 shared
    assert misses(budget, "203.0.113.2", 3) == "..."  # another network


def test_keys_authsvc_names_cost_nothing() -> None:
    budget = UnknownKeyBudget(rate=1.0, burst=2)
    assert misses(budget, "198.51.100.1", 10, answer=KNOWN_DENIED) == "." * 10
    assert misses(budget, "198.51.100.1", 10, answer=ALLOWED) == "." * 10
    got = budget.admit("198.51.100.1", 0)
    assert isinstance(got, Ticket)
    budget.settle(got, 0, None)  # authsvc gave no answer: nothing learnt, nothing charged
    assert misses(budget, "198.51.100.1", 3) == "..s"


def test_a_block_and_then_every_address_together_are_held() -> None:
    # source burst 2, block 4 (x2), global 6 (x3)
    budget = UnknownKeyBudget(rate=0.001, burst=2, block_share=2.0, global_share=3.0)
    flood = "".join(misses(budget, f"198.51.100.{i}", 1) for i in range(10))
    assert flood == "....bbbbbb"  # one /24: four, then its block is spent
    flood = "".join(misses(budget, f"203.0.{i}.1", 1) for i in range(10))
    assert flood == "..gggggggg"  # many /24s: the global budget's last two, then nothing
    six = "".join(misses(budget, f"2001:db8:{i}::1", 1) for i in range(3))
    assert six == "ggg"  # IPv6 too


def test_a_known_source_is_held_to_its_own_budget_only() -> None:
    budget = UnknownKeyBudget(rate=0.001, burst=2, block_share=2.0, global_share=3.0)
    assert misses(budget, "192.0.2.10", 1, answer=ALLOWED) == "."  # a partner's key allowed: known
    assert "".join(misses(budget, f"203.0.{i}.1", 1) for i in range(8)) == "......gg"
    assert budget.known("192.0.2.10", 0) and not budget.known("192.0.2.11", 0)
    assert misses(budget, "192.0.2.10", 3, answer=ALLOWED) == "..."  # its first uses go on
    assert misses(budget, "192.0.2.11", 1, answer=ALLOWED) == "g"  # an address never seen waits
    # Its own made-up keys are still held to its own budget.
    assert misses(budget, "192.0.2.10", 3) == "..s"
    # Known for KNOWN_TTL after the last allowed key, then anonymous again.
    later = int(budget.known_ttl * US)
    assert budget.known("192.0.2.10", later - 1) and not budget.known("192.0.2.10", later)


def test_the_tables_hold_at_most_max_sources() -> None:
    budget = UnknownKeyBudget(rate=1.0, burst=1, block_share=10.0, global_share=10.0, max_sources=2)
    for source in ("10.0.1.1", "10.0.2.1", "10.0.3.1"):
        assert misses(budget, source, 1) == "."
    assert len(budget) == 2
    assert misses(budget, "10.0.1.1", 1) == "."  # forgotten: a full budget again
    assert misses(budget, "10.0.3.1", 1) == "s"


REAL = "svc_test_real"


class Authsvc(auth_pb2_grpc.AuthServiceServicer):
    """Knows one key; denies every other as unknown (no key in the answer). Counts the calls."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.also_known: set[str] = set()

    async def Authorize(self, request: pb.AuthorizeRequest, context: Any) -> pb.AuthorizeResponse:
        self.asked.append(request.api_key)
        ttl = duration_pb2.Duration(seconds=60)
        if request.api_key == REAL or request.api_key in self.also_known:
            key = pb.ApiKey(id="key_1", account_id="acct_1", environment=pb.ENVIRONMENT_SANDBOX)
            return pb.AuthorizeResponse(decision=pb.DECISION_ALLOW, key=key, cache_ttl=ttl)
        return pb.AuthorizeResponse(decision=pb.DECISION_DENY, error_type="invalid_api_key", cache_ttl=ttl)


@pytest.fixture
async def authsvc() -> AsyncIterator[tuple[Authsvc, str]]:
    servicer = Authsvc()  # type: ignore[abstract]  # the RPCs not implemented answer UNIMPLEMENTED
    server = grpc.aio.server()
    auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def test_a_flood_of_made_up_keys_stops_at_its_sources_budget(authsvc: tuple[Authsvc, str]) -> None:
    servicer, target = authsvc
    env = Environment.SANDBOX
    async with AuthClient(target, None) as auth:
        authz = Authorizer(auth, monotonic=lambda: 100.0, unknown_keys=UnknownKeyBudget(rate=1.0, burst=5))
        authz.apply_change(pb.KEY_CHANGE_KIND_SYNC, "", "")  # the watch is up: the cache answers first

        async def ask(key: str, source: str) -> str:
            try:
                got = await authz.answer(key, env, "", source, False, "req_1")
            except RateLimited as exc:
                assert exc.retry_after >= 1
                return "rate_limited"
            return "allowed" if got.allowed else got.error_type

        flood = [await ask(f"svc_test_made_up_{i}", "198.51.100.1") for i in range(20)]
        assert flood == ["invalid_api_key"] * 5 + ["rate_limited"] * 15
        assert len(servicer.asked) == 5  # the refused ones never reached authsvc
        # A made-up key already denied is the cache's answer, not a look-up: still answered.
        assert await ask("svc_test_made_up_0", "198.51.100.1") == "invalid_api_key"
        # Another source, and a real key's first use from it, are asked about as before.
        assert await ask("svc_test_made_up_x", "203.0.113.9") == "invalid_api_key"
        assert await ask(REAL, "203.0.113.9") == "allowed"
        assert servicer.asked[-2:] == ["svc_test_made_up_x", REAL]


async def test_a_flood_from_200_addresses_stays_within_the_global_budget(
    authsvc: tuple[Authsvc, str],
) -> None:
    """Made-up keys from 200 addresses in 200 networks, all at once: each address is within its own
    budget and its block's, and only the global budget's worth reach authsvc. A partner whose key was
    allowed before has its first use of a new key served; an address never seen is asked to retry."""
    servicer, target = authsvc
    env = Environment.SANDBOX
    clock = [100.0]
    budget = UnknownKeyBudget(rate=0.01, burst=5, block_share=2.0, global_share=8.0)  # global: 40 at once
    async with AuthClient(target, None) as auth:
        authz = Authorizer(auth, monotonic=lambda: clock[0], unknown_keys=budget)
        authz.apply_change(pb.KEY_CHANGE_KIND_SYNC, "", "")

        async def ask(key: str, source: str) -> str:
            try:
                got = await authz.answer(key, env, "", source, False, "req_1")
            except RateLimited as exc:
                assert exc.retry_after >= 1
                return "rate_limited"
            return "allowed" if got.allowed else got.error_type

        partner = "192.0.2.10"
        assert await ask(REAL, partner) == "allowed"  # the partner's host is known from now on
        flood = await asyncio.gather(
            *(ask(f"svc_test_made_up_{i}", f"10.{i // 250}.{i % 250}.1") for i in range(200))
        )
        assert Counter(flood) == {"invalid_api_key": 40, "rate_limited": 160}
        assert len(servicer.asked) == 1 + 40  # the partner's key, then the global budget, no more

        # The partner's first use of another real key is asked about and served; a new address waits.
        servicer.also_known.add(REAL + "_2")
        assert await ask(REAL + "_2", partner) == "allowed"
        assert await ask(REAL + "_2", "198.51.100.99") == "rate_limited"
        assert len(servicer.asked) == 42
        clock[0] += 1 / (0.01 * 8.0)  # the global budget refills by one
        assert await ask(REAL + "_2", "198.51.100.99") == "allowed"

"""The per-source budget of unknown-key look-ups (edge.unknownkeys), by table, and the Authorizer in front
of a loopback authsvc: past its budget a source's made-up keys are refused 429 without asking authsvc,
while another source, and a real key, are asked about as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from edge.authorizer import Authorizer
from edge.environments import Environment
from edge.exceptions import RateLimited
from edge.gcra import US
from edge.unknownkeys import UnknownKeyBudget
from svckit.clients import AuthClient
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

# (charges made at t=0 before the question, the question's time in s, whether it waits)
CASES = [
    (0, 0.0, False),
    (2, 0.0, False),
    (3, 0.0, True),  # burst 3 spent
    (3, 0.49, True),
    (3, 0.5, False),  # one refilled at 2 a second
    (10, 0.0, True),  # charges past the burst are not counted: it refills as after 3
    (10, 0.5, False),
]


@pytest.mark.parametrize(("charges", "at", "waits"), CASES)
def test_budget(charges: int, at: float, waits: bool) -> None:
    budget = UnknownKeyBudget(rate=2.0, burst=3)
    for _ in range(charges):
        budget.charge("198.51.100.1", 0)
    assert (budget.wait("198.51.100.1", int(at * US)) > 0) is waits
    assert budget.wait("203.0.113.9", 0) == 0  # another source is untouched


def test_the_table_holds_at_most_max_sources() -> None:
    budget = UnknownKeyBudget(rate=1.0, burst=1, max_sources=2)
    for source in ("a", "b", "c"):
        budget.charge(source, 0)
    assert len(budget) == 2
    assert budget.wait("a", 0) == 0  # forgotten: a full budget again
    assert budget.wait("c", 0) > 0


REAL = "svc_test_real"


class Authsvc(auth_pb2_grpc.AuthServiceServicer):
    """Knows one key; denies every other as unknown (no key in the answer). Counts the calls."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def Authorize(self, request: pb.AuthorizeRequest, context: Any) -> pb.AuthorizeResponse:
        self.asked.append(request.api_key)
        ttl = duration_pb2.Duration(seconds=60)
        if request.api_key == REAL:
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

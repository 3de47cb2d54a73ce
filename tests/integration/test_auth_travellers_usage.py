"""Traveller references and the daily search allowance over real gRPC, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import grpc

from authsvc.testing import error_of, new_account, new_key, running_authsvc
from svckit.quota import threshold_of
from travel.auth.v1 import auth_pb2 as pb

LIVE, SANDBOX = pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX


async def test_travellers_are_stable_scoped_and_deletable(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        a = await new_account(stub)
        b = await new_account(stub, name="B")

        def resolve(account: str, env: pb.Environment.ValueType, ref: str) -> pb.ResolveTravellerRequest:
            return pb.ResolveTravellerRequest(account_id=account, environment=env, partner_ref=ref)

        first = await stub.ResolveTraveller(resolve(a.id, LIVE, "cust_42"))
        again = await stub.ResolveTraveller(resolve(a.id, LIVE, "cust_42"))
        assert first.traveller_id.startswith("trv_") and first.created and not again.created
        assert again.traveller_id == first.traveller_id
        others = {
            (await stub.ResolveTraveller(resolve(a.id, SANDBOX, "cust_42"))).traveller_id,
            (await stub.ResolveTraveller(resolve(b.id, LIVE, "cust_42"))).traveller_id,
            (await stub.ResolveTraveller(resolve(a.id, LIVE, "cust_43"))).traveller_id,
        }
        assert len(others) == 3 and first.traveller_id not in others

        # Concurrent first resolves of one ref agree on one id (unique constraint).
        results = await asyncio.gather(
            *[stub.ResolveTraveller(resolve(a.id, LIVE, "race")) for _ in range(20)]
        )
        assert len({r.traveller_id for r in results}) == 1
        assert sum(r.created for r in results) == 1

        deleted = await stub.DeleteTraveller(
            pb.DeleteTravellerRequest(account_id=a.id, environment=LIVE, partner_ref="cust_42")
        )
        assert deleted.traveller_id == first.traveller_id
        code, etype, _ = await error_of(
            stub.DeleteTraveller(
                pb.DeleteTravellerRequest(account_id=a.id, environment=LIVE, partner_ref="cust_42")
            )
        )
        assert (code, etype) == (grpc.StatusCode.NOT_FOUND, "not_found")
        fresh = await stub.ResolveTraveller(resolve(a.id, LIVE, "cust_42"))
        assert fresh.created and fresh.traveller_id != first.traveller_id

        for bad in ["", "has space", "x" * 65, "jane.doe@example.com", "tab\t"]:
            code, etype, msg = await error_of(stub.ResolveTraveller(resolve(a.id, LIVE, bad)))
            assert (code, etype) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_customer_ref"), bad
            assert "X-Partner-Customer-Ref" in msg
        assert (await error_of(stub.ResolveTraveller(resolve("acct_nope", LIVE, "c1"))))[1] == "not_found"
        assert (await error_of(stub.ResolveTraveller(resolve(a.id, pb.ENVIRONMENT_UNSPECIFIED, "c1"))))[
            1
        ] == "invalid_request"


async def test_search_allowance_is_exact_under_concurrency(db_url: str) -> None:
    allowance = 40
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub, allowance=allowance)
        key = (await new_key(stub, account.id)).key

        async def consume() -> bool:
            try:
                await stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, key_id=key.id))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                return False
            return True

        results = await asyncio.gather(*[consume() for _ in range(allowance + 25)])
        assert sum(results) == allowance
        usage = (await stub.GetUsage(pb.GetUsageRequest(account_id=account.id))).usage
        assert (usage.searches_used, usage.remaining, usage.daily_search_allowance) == (
            allowance,
            0,
            allowance,
        )
        code, etype, msg = await error_of(
            stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE))
        )
        assert (code, etype) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "search_quota_exhausted")
        assert str(allowance) in msg

        # The threshold event was queued exactly once, in the outbox.
        rows = [r for r in await server.repo.outbox_rows() if r["type"] == "search_quota.threshold"]
        assert len(rows) == 1
        data = json.loads(rows[0]["data"])
        assert data["searchesUsed"] == threshold_of(allowance) and data["dailySearchAllowance"] == allowance
        assert rows[0]["account_id"] == account.id and rows[0]["environment"] == "live"


async def test_threshold_fires_once_when_crossed_by_a_batch(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub, allowance=10)
        r = await stub.ConsumeSearch(
            pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE, count=7)
        )
        assert r.counted and r.usage.searches_used == 7
        assert await server.repo.outbox_rows() == []
        r = await stub.ConsumeSearch(
            pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE, count=2)
        )
        assert r.usage.searches_used == 9 and r.usage.remaining == 1
        await stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE))
        assert [row["type"] for row in await server.repo.outbox_rows()] == ["search_quota.threshold"]
        # A batch that does not fit is refused whole: nothing counted.
        _, etype, _ = await error_of(
            stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE, count=1))
        )
        assert etype == "search_quota_exhausted"
        assert (await stub.GetUsage(pb.GetUsageRequest(account_id=account.id))).usage.searches_used == 10


async def test_sandbox_searches_are_never_counted(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub, allowance=1)
        test_key = (await new_key(stub, account.id, environment=SANDBOX)).key
        for _ in range(3):
            r = await stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, key_id=test_key.id))
            assert not r.counted and r.usage.searches_used == 0
        r = await stub.ConsumeSearch(
            pb.ConsumeSearchRequest(account_id=account.id, environment=SANDBOX, count=5)
        )
        assert not r.counted
        assert (await stub.GetUsage(pb.GetUsageRequest(account_id=account.id))).usage.searches_used == 0


async def test_usage_bad_input(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        other = await new_account(stub, name="o")
        other_key = (await new_key(stub, other.id)).key
        cases = [
            (stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id)), "invalid_request"),
            (
                stub.ConsumeSearch(
                    pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE, count=-1)
                ),
                "invalid_request",
            ),
            (
                stub.ConsumeSearch(
                    pb.ConsumeSearchRequest(account_id=account.id, environment=LIVE, count=1001)
                ),
                "invalid_request",
            ),
            (
                stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, key_id=other_key.id)),
                "invalid_request",
            ),
            (
                stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id="acct_nope", environment=LIVE)),
                "not_found",
            ),
            (stub.GetUsage(pb.GetUsageRequest(account_id=account.id, date="2026-13-01")), "invalid_request"),
            (stub.GetUsage(pb.GetUsageRequest(account_id=account.id, date="yesterday")), "invalid_request"),
            (stub.GetUsage(pb.GetUsageRequest(account_id="acct_nope")), "not_found"),
        ]
        for call, etype in cases:
            assert (await error_of(call))[1] == etype
        assert (await stub.GetUsage(pb.GetUsageRequest(account_id=account.id))).usage.searches_used == 0
        past = await stub.GetUsage(pb.GetUsageRequest(account_id=account.id, date="2026-01-01"))
        assert past.usage.date == "2026-01-01" and past.usage.searches_used == 0

"""Mode A credit over gRPC against a real authsvc, on SQLite and on PostgreSQL: parallel holds never spend
more than the credit, holds are idempotent by booking reference, ledger.low_balance is queued once per
crossing in the hold's own transaction, and the allow list gives each caller only its part."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import grpc
import pytest

from authsvc import run_server
from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from svckit.clients import AuthClient, ClientError, CreditExhausted
from tests.support import tls_of
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

LIVE = pb.ENVIRONMENT_LIVE
PRICE = 1_000  # one booking, in cents
BOOKINGS = 50


async def funded(stub: auth_pb2_grpc.AuthServiceStub, limit: int, **kw: Any) -> pb.Account:
    account = await new_account(stub)
    await stub.SetCreditLimit(
        pb.SetCreditLimitRequest(
            account_id=account.id, environment=LIVE, credit_limit=limit, currency="EUR", actor=ACTOR, **kw
        )
    )
    return account


def hold(
    account: pb.Account, ref: str, amount: int = PRICE, currency: str = "EUR"
) -> pb.PlaceCreditHoldRequest:
    return pb.PlaceCreditHoldRequest(
        account_id=account.id, environment=LIVE, booking_ref=ref, amount=amount, currency=currency
    )


async def low_balance_rows(server: Any) -> list[dict[str, Any]]:
    return [r for r in await server.repo.outbox_rows() if r["type"] == "ledger.low_balance"]


def balances(ledger: pb.CreditLedger) -> bool:
    return ledger.available == ledger.credit_limit - ledger.held - ledger.captured + ledger.credits


async def test_a_hundred_parallel_holds_against_fifty_bookings_of_credit(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await funded(stub, BOOKINGS * PRICE)
        results = await asyncio.gather(
            *(stub.PlaceCreditHold(hold(account, f"bk_{i:03d}")) for i in range(100)), return_exceptions=True
        )
        placed = [r for r in results if isinstance(r, pb.PlaceCreditHoldResponse)]
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(placed) == BOOKINGS and len(refused) == 100 - BOOKINGS, results
        assert {r.code() for r in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert all("does not cover this booking" in (r.details() or "") for r in refused)
        ledger = (
            await stub.GetCreditLedger(pb.GetCreditLedgerRequest(account_id=account.id, environment=LIVE))
        ).ledger
        assert (ledger.held, ledger.available, ledger.currency) == (BOOKINGS * PRICE, 0, "EUR")
        assert balances(ledger) and ledger.below_warning
        # The warning level (10 % of the limit) was crossed once: one event, queued with its hold.
        rows = await low_balance_rows(server)
        assert len(rows) == 1, rows
        data = json.loads(rows[0]["data"])
        assert data == {"amount": 4 * PRICE, "currency": "EUR", "warningLevel": BOOKINGS * PRICE // 10}
        entries = await stub.ListLedgerEntries(
            pb.ListLedgerEntriesRequest(account_id=account.id, environment=LIVE, page_size=200)
        )
        kinds = [e.kind for e in entries.entries]
        assert kinds.count(pb.LEDGER_ENTRY_KIND_HOLD) == BOOKINGS and kinds[-1] == pb.LEDGER_ENTRY_KIND_LIMIT
        # Newest first, and each entry's available is the running balance.
        afters = [e.available_after for e in entries.entries if e.kind == pb.LEDGER_ENTRY_KIND_HOLD]
        assert afters == list(range(0, BOOKINGS * PRICE, PRICE))


async def test_a_hold_is_keyed_by_its_booking_reference(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await funded(stub, 10_000)
        first = await stub.PlaceCreditHold(hold(account, "bk_1", 3_000))
        assert not first.replayed and first.hold.state == pb.CREDIT_HOLD_STATE_HELD
        again = await stub.PlaceCreditHold(hold(account, "bk_1", 3_000))
        assert again.replayed and again.ledger.held == 3_000
        code, kind, message = await error_of(stub.PlaceCreditHold(hold(account, "bk_1", 3_001)))
        assert (code, kind) == (grpc.StatusCode.FAILED_PRECONDITION, "conflict") and "3000" in message
        code, kind, _ = await error_of(stub.PlaceCreditHold(hold(account, "bk_2", 100, currency="USD")))
        assert (code, kind) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request")
        for bad in (hold(account, "bk 3"), hold(account, "bk_3", 0), hold(account, "", 10)):
            assert (await error_of(stub.PlaceCreditHold(bad)))[1] == "invalid_request"

        where: dict[str, Any] = {"account_id": account.id, "environment": LIVE, "booking_ref": "bk_1"}
        captured = await stub.CaptureCreditHold(pb.CaptureCreditHoldRequest(**where))
        assert captured.hold.state == pb.CREDIT_HOLD_STATE_CAPTURED
        assert (captured.ledger.held, captured.ledger.captured) == (0, 3_000)
        assert (await stub.CaptureCreditHold(pb.CaptureCreditHoldRequest(**where))).replayed
        # A cancelled confirmed booking: its spend comes back.
        released = await stub.ReleaseCreditHold(pb.ReleaseCreditHoldRequest(**where))
        assert released.ledger.available == 10_000 and not released.replayed
        assert (await stub.ReleaseCreditHold(pb.ReleaseCreditHoldRequest(**where))).replayed
        code, kind, _ = await error_of(stub.CaptureCreditHold(pb.CaptureCreditHoldRequest(**where)))
        assert (code, kind) == (grpc.StatusCode.FAILED_PRECONDITION, "conflict")
        unknown = {**where, "booking_ref": "bk_nope"}
        assert (await error_of(stub.ReleaseCreditHold(pb.ReleaseCreditHoldRequest(**unknown))))[
            1
        ] == "not_found"
        # A released booking tried again is held again (if it fits), not waved through.
        retried = await stub.PlaceCreditHold(hold(account, "bk_1", 3_000))
        assert (retried.replayed, retried.hold.state, retried.ledger.held) == (
            False,
            pb.CREDIT_HOLD_STATE_HELD,
            3_000,
        )
        code, kind, _ = await error_of(stub.PlaceCreditHold(hold(account, "bk_1", 3_001)))
        assert kind == "conflict"
        await stub.ReleaseCreditHold(pb.ReleaseCreditHoldRequest(**where))
        await stub.SetCreditLimit(
            pb.SetCreditLimitRequest(account_id=account.id, environment=LIVE, credit_limit=2_000, actor=ACTOR)
        )
        code, kind, _ = await error_of(stub.PlaceCreditHold(hold(account, "bk_1", 3_000)))
        assert (code, kind) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "credit_exhausted")

        # A mode B account has no credit to hold.
        b = await stub.CreateAccount(pb.CreateAccountRequest(name="B", mode=pb.ACCOUNT_MODE_B, actor=ACTOR))
        code, kind, message = await error_of(stub.PlaceCreditHold(hold(b.account, "bk_1")))
        assert (code, kind) == (grpc.StatusCode.FAILED_PRECONDITION, "conflict") and "mode B" in message


async def test_low_balance_once_per_crossing_and_operator_changes(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await funded(stub, 10_000)  # warning level 1 000
        await stub.PlaceCreditHold(hold(account, "bk_1", 9_500))
        await stub.PlaceCreditHold(hold(account, "bk_2", 100))  # still below: no second event
        assert len(await low_balance_rows(server)) == 1
        where: dict[str, Any] = {"account_id": account.id, "environment": LIVE}
        await stub.ReleaseCreditHold(pb.ReleaseCreditHoldRequest(booking_ref="bk_1", **where))
        await stub.PlaceCreditHold(hold(account, "bk_3", 9_000))  # fell again: a second event
        assert len(await low_balance_rows(server)) == 2

        credit = pb.AddCreditRequest(amount=5_000, reference="pay_1", note="wire", actor=ACTOR, **where)
        added = await stub.AddCredit(credit)
        assert not added.replayed and added.ledger.credits == 5_000 and not added.ledger.below_warning
        again = await stub.AddCredit(credit)
        assert again.replayed and again.entry.id == added.entry.id
        assert (await error_of(stub.AddCredit(pb.AddCreditRequest(**{**_fields(credit), "amount": 1}))))[
            1
        ] == ("conflict")
        level = await stub.SetCreditWarningLevel(
            pb.SetCreditWarningLevelRequest(warning_level=6_000, actor=ACTOR, **where)
        )
        assert level.ledger.warning_level == 6_000 and not level.ledger.warning_level_default
        assert level.ledger.below_warning and len(await low_balance_rows(server)) == 3
        _code, kind, _ = await error_of(
            stub.SetCreditLimit(
                pb.SetCreditLimitRequest(credit_limit=1, currency="USD", actor=ACTOR, **where)
            )
        )
        assert kind == "invalid_request"
        ledger = (await stub.GetCreditLedger(pb.GetCreditLedgerRequest(**where))).ledger
        assert balances(ledger) and ledger.available == 10_000 - 100 - 9_000 + 5_000
        # Operators' changes are in the audit trail with who made them.
        audit = await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))
        actions = [e.action for e in audit.events]
        assert {"ledger.limit_set", "ledger.credit_added", "ledger.warning_level_set"} <= set(actions)
        assert all(e.actor.user == ACTOR.user for e in audit.events if e.action.startswith("ledger."))

        pages, token = [], ""
        while True:
            page = await stub.ListLedgerEntries(
                pb.ListLedgerEntriesRequest(page_size=2, page_token=token, **where)
            )
            pages.append(page.entries)
            token = page.next_page_token
            if not token:
                break
        ids = [e.id for p in pages for e in p]
        assert len(ids) == len(set(ids)) == 7 and all(len(p) <= 2 for p in pages)
        bad = pb.ListLedgerEntriesRequest(page_token="nope", **where)
        assert (await error_of(stub.ListLedgerEntries(bad)))[1] == "invalid_request"


def _fields(message: Any) -> dict[str, Any]:
    return {f.name: getattr(message, f.name) for f, _ in message.ListFields()}


@pytest.fixture
async def tls_authsvc(sqlite_url: str, pki: pathlib.Path) -> Any:
    server = await run_server("127.0.0.1:0", sqlite_url, tls=tls_of(pki, "authsvc"))
    try:
        yield server
    finally:
        await server.stop(0)


async def test_who_may_call_what_and_the_typed_refusal(tls_authsvc: Any, pki: pathlib.Path) -> None:
    target = f"127.0.0.1:{tls_authsvc.port}"
    async with (
        AuthClient(target, tls_of(pki, "svcctl")) as ops,
        AuthClient(target, tls_of(pki, "product:hotels")) as product,
        AuthClient(target, tls_of(pki, "edge")) as edge,
    ):
        account = (await ops.create_account(pb.CreateAccountRequest(name="P", actor=ACTOR))).account
        limit = pb.SetCreditLimitRequest(
            account_id=account.id, environment=LIVE, credit_limit=1_500, currency="EUR", actor=ACTOR
        )
        await ops.set_credit_limit(limit)
        placed = await product.place_credit_hold(hold(account, "bk_1"))
        assert placed.ledger.available == 500
        entries = await ops.list_ledger_entries(
            pb.ListLedgerEntriesRequest(account_id=account.id, environment=LIVE)
        )
        assert [e.actor.service for e in entries.entries] == ["product:hotels", "svcctl"]
        with pytest.raises(CreditExhausted) as refused:
            await product.place_credit_hold(hold(account, "bk_2"))
        assert refused.value.status == 402
        assert refused.value.body()["error"]["type"] == "credit_exhausted"
        assert "500" in refused.value.body()["error"]["message"]
        where = pb.GetCreditLedgerRequest(account_id=account.id, environment=LIVE)
        assert (await edge.get_credit_ledger(where)).ledger.held == PRICE
        # The edge reads; it never holds, and neither it nor a product sets limits or adds credit.
        for call in (edge.place_credit_hold(hold(account, "bk_3")), product.set_credit_limit(limit)):
            with pytest.raises(ClientError) as denied:
                await call
            assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
        credit = pb.AddCreditRequest(
            account_id=account.id, environment=LIVE, amount=5, reference="r", actor=ACTOR
        )
        with pytest.raises(ClientError) as denied:
            await edge.add_credit(credit)
        assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED


async def test_the_ledger_revision_matches_the_tables(db_url: str) -> None:
    from authsvc._sql import SqlRepository, metadata
    from authsvc.migrations import SCHEMA
    from svckit.db import create_engine
    from svckit.migrations import drift, head

    engine = create_engine(db_url)
    try:
        assert await SqlRepository(engine).migrate() == head(SCHEMA)
        async with engine.connect() as conn:
            assert await conn.run_sync(lambda sync: drift(sync, SCHEMA, metadata)) == []
    finally:
        await engine.dispose()


async def test_two_authsvc_processes_on_one_database_share_the_credit(db_url: str) -> None:
    """Holds split across two servers on one database (as several authsvc processes run) still never
    spend more than the credit: the lock is the database's, not a process's."""
    async with running_authsvc(db_url) as (_one, first), running_authsvc(db_url) as (_two, second):
        account = await funded(first, 20 * PRICE)
        stubs = (first, second)
        results = await asyncio.gather(
            *(stubs[i % 2].PlaceCreditHold(hold(account, f"bk_{i:03d}")) for i in range(40)),
            return_exceptions=True,
        )
        placed = [r for r in results if isinstance(r, pb.PlaceCreditHoldResponse)]
        assert len(placed) == 20, results
        where = pb.GetCreditLedgerRequest(account_id=account.id, environment=LIVE)
        ledger = (await second.GetCreditLedger(where)).ledger
        assert (ledger.held, ledger.available) == (20 * PRICE, 0)

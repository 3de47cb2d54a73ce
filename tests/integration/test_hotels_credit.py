"""The reference hotels service's credit steps (examples.hotels.bookings.with_credit) against a real
authsvc over gRPC: held before the supplier, captured on confirm, released when the booking fails, never
held in the sandbox or for mode B, and a booking that does not fit never reaches the supplier."""

from __future__ import annotations

from typing import Any

import pytest

from authsvc.testing import ACTOR, running_authsvc
from examples.hotels.bookings import Answer, with_credit
from svckit.clients import AuthClient, CreditExhausted
from travel.auth.v1 import auth_pb2 as pb

OFFER = {"id": "off_hotels_3", "amount": 8_900, "currency": "EUR"}


class Supplier:
    def __init__(self, answer: Answer | Exception) -> None:
        self.answer = answer
        self.calls = 0

    async def __call__(self) -> Answer:
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_hold_capture_release_around_the_supplier(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        a = (await stub.CreateAccount(pb.CreateAccountRequest(name="A", actor=ACTOR))).account
        b = (
            await stub.CreateAccount(pb.CreateAccountRequest(name="B", mode=pb.ACCOUNT_MODE_B, actor=ACTOR))
        ).account
        where: dict[str, Any] = {"account_id": a.id, "environment": pb.ENVIRONMENT_LIVE}
        await stub.SetCreditLimit(
            pb.SetCreditLimitRequest(**where, credit_limit=20_000, currency="EUR", actor=ACTOR)
        )
        async with AuthClient(f"127.0.0.1:{server.port}", None) as auth:

            async def ledger() -> pb.CreditLedger:
                return (await auth.get_credit_ledger(pb.GetCreditLedgerRequest(**where))).ledger

            confirmed = Supplier(Answer(201, {"state": "confirmed"}))
            assert (await with_credit(auth, a.id, "live", "bk_1", OFFER, confirmed)).status == 201
            assert ((await ledger()).held, (await ledger()).captured) == (0, 8_900)

            # The supplier fails: the hold is given back, the error goes on.
            with pytest.raises(RuntimeError):
                await with_credit(auth, a.id, "live", "bk_2", OFFER, Supplier(RuntimeError("supplier down")))
            refused = Supplier(Answer(409, {"error": {"type": "conflict"}}))
            assert (await with_credit(auth, a.id, "live", "bk_3", OFFER, refused)).status == 409
            assert ((await ledger()).held, (await ledger()).available) == (0, 20_000 - 8_900)

            # The partner retries the failed booking: held (and here captured) again.
            assert (await with_credit(auth, a.id, "live", "bk_2", OFFER, confirmed)).status == 201
            assert (await ledger()).available == 20_000 - 2 * 8_900

            # It does not fit: refused before the supplier is asked.
            untouched = Supplier(Answer(201, {}))
            with pytest.raises(CreditExhausted) as exhausted:
                await with_credit(auth, a.id, "live", "bk_4", OFFER, untouched)
            assert untouched.calls == 0 and exhausted.value.body()["error"]["type"] == "credit_exhausted"

            # The sandbox and mode B spend no credit.
            assert (await with_credit(auth, a.id, "sandbox", "bk_5", OFFER, confirmed)).status == 201
            assert (await with_credit(auth, b.id, "live", "bk_6", OFFER, confirmed)).status == 201
            assert (await ledger()).available == 20_000 - 2 * 8_900
            assert confirmed.calls == 4

"""An account read and its status set in authsvc over real gRPC on loopback, on SQLite and
PostgreSQL (db_url)."""

from __future__ import annotations

from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from travel.auth.v1 import auth_pb2 as pb


async def test_account_read_and_status(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        created = await stub.CreateAccount(
            pb.CreateAccountRequest(
                name="Acme",
                mode=pb.ACCOUNT_MODE_B,
                admin_emails=["ops@acme.example"],
                daily_search_allowance=5,
                actor=ACTOR,
            )
        )
        got = (await stub.GetAccount(pb.GetAccountRequest(account_id=created.account.id))).account
        assert (got.name, got.mode, list(got.admin_emails), got.daily_search_allowance) == (
            "Acme",
            pb.ACCOUNT_MODE_B,
            ["ops@acme.example"],
            5,
        )
        default = await new_account(stub)
        assert default.daily_search_allowance == 10_000
        changed = await stub.SetAccountStatus(
            pb.SetAccountStatusRequest(account_id=got.id, status=pb.ACCOUNT_STATUS_READ_ONLY, actor=ACTOR)
        )
        assert changed.account.status == pb.ACCOUNT_STATUS_READ_ONLY
        _, etype, _ = await error_of(
            stub.SetAccountStatus(
                pb.SetAccountStatusRequest(
                    account_id=got.id, status=pb.ACCOUNT_STATUS_UNSPECIFIED, actor=ACTOR
                )
            )
        )
        assert etype == "invalid_request"

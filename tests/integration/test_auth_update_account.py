"""UpdateAccount (name, admin e-mails, daily allowance; audited with before/after) and
``svcctl accounts update``, against a real authsvc on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2, json_format

from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from tests.integration.test_auth_cli import cli
from travel.auth.v1 import auth_pb2 as pb


def update(account_id: str, paths: list[str], **fields: Any) -> pb.UpdateAccountRequest:
    return pb.UpdateAccountRequest(
        account_id=account_id, update_mask=field_mask_pb2.FieldMask(paths=paths), actor=ACTOR, **fields
    )


async def test_update_account_changes_and_audits_only_what_changed(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub, allowance=50, name="Acme")
        resp = await stub.UpdateAccount(
            update(
                account.id,
                ["name", "admin_emails", "daily_search_allowance"],
                name="Acme Travel",
                admin_emails=["ops@acme.example", "cto@acme.example"],
                daily_search_allowance=500,
            )
        )
        got = (await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))).account
        for a in (resp.account, got):
            assert a.name == "Acme Travel" and a.daily_search_allowance == 500
            assert list(a.admin_emails) == ["ops@acme.example", "cto@acme.example"]
            assert a.mode == account.mode and a.status == account.status
        # Only the named fields change; the same value again is no change and writes no audit record.
        await stub.UpdateAccount(update(account.id, ["name"], name="Acme Travel"))
        await stub.UpdateAccount(update(account.id, ["admin_emails"]))  # clears them
        events = (await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))).events
        updated = [e for e in events if e.action == "account.updated"]
        assert len(updated) == 2
        first, second = (
            (json_format.MessageToDict(e.before), json_format.MessageToDict(e.after)) for e in updated
        )
        assert first == (
            {"name": "Acme", "admin_emails": [], "daily_search_allowance": 50},
            {
                "name": "Acme Travel",
                "admin_emails": ["ops@acme.example", "cto@acme.example"],
                "daily_search_allowance": 500,
            },
        )
        assert second == (
            {"admin_emails": ["ops@acme.example", "cto@acme.example"]},
            {"admin_emails": []},
        )
        assert all(e.actor.user == ACTOR.user for e in updated)
        assert (await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))).account.admin_emails == []


@pytest.mark.parametrize(
    ("paths", "fields", "status", "etype"),
    [
        ([], {}, grpc.StatusCode.INVALID_ARGUMENT, "invalid_request"),
        (["mode"], {}, grpc.StatusCode.INVALID_ARGUMENT, "invalid_request"),
        (["name"], {"name": ""}, grpc.StatusCode.INVALID_ARGUMENT, "invalid_request"),
        (
            ["admin_emails"],
            {"admin_emails": ["not-an-address"]},
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid_request",
        ),
        (
            ["daily_search_allowance"],
            {"daily_search_allowance": -1},
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid_request",
        ),
        (
            ["look_to_book_target"],
            {"look_to_book_target": -1},
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid_request",
        ),
        (
            ["look_to_book_target"],
            {"look_to_book_target": 1_000_001},
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid_request",
        ),
    ],
)
async def test_bad_updates_change_nothing(
    sqlite_url: str, paths: list[str], fields: dict[str, object], status: grpc.StatusCode, etype: str
) -> None:
    async with running_authsvc(sqlite_url) as (_server, stub):
        account = await new_account(stub, name="Acme")
        code, got_type, _ = await error_of(stub.UpdateAccount(update(account.id, paths, **fields)))
        assert (code, got_type) == (status, etype)
        assert (await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))).account == account
        events = (await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))).events
        assert not [e for e in events if e.action == "account.updated"]
    async with running_authsvc(sqlite_url) as (_server, stub):
        code, got_type, _ = await error_of(stub.UpdateAccount(update("acct_nosuch", ["name"], name="x")))
        assert got_type == "not_found"


async def test_svcctl_accounts_update(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        t = f"127.0.0.1:{server.port}"
        account = await new_account(stub, name="Acme")
        code, out, _ = await cli(
            t, "accounts", "update", account.id, "--name", "Acme 2", "--admin-email", "a@acme.example",
            "--daily-search-allowance", "7",
        )  # fmt: skip
        assert code == 0
        assert out["account"]["name"] == "Acme 2" and out["account"]["admin_emails"] == ["a@acme.example"]
        assert int(out["account"]["daily_search_allowance"]) == 7
        code, out, _ = await cli(t, "accounts", "update", account.id, "--clear-admin-emails")
        assert code == 0 and "admin_emails" not in out["account"]
        events = (await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))).events
        assert [e.actor.user for e in events if e.action == "account.updated"] == ["ops:cli-test"] * 2


async def test_look_to_book_target_none_by_default_set_and_cleared_by_operators(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        t = f"127.0.0.1:{server.port}"
        account = await new_account(stub, name="Acme")
        assert account.look_to_book_target == 0  # none by default
        code, out, _ = await cli(t, "accounts", "update", account.id, "--look-to-book-target", "1500")
        assert code == 0 and int(out["account"]["look_to_book_target"]) == 1500
        got = (await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))).account
        assert got.look_to_book_target == 1500 and got.name == "Acme"
        code, out, _ = await cli(t, "accounts", "update", account.id, "--look-to-book-target", "0")
        assert code == 0 and "look_to_book_target" not in out["account"]
        code, _, err = await cli(t, "accounts", "update", account.id, "--look-to-book-target", "1000001")
        assert code != 0 and "look_to_book_target" in err
        events = (await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))).events
        changes = [
            (json_format.MessageToDict(e.before), json_format.MessageToDict(e.after))
            for e in events
            if e.action == "account.updated"
        ]
        assert sorted(changes, key=str) == sorted(
            [
                ({"look_to_book_target": 0}, {"look_to_book_target": 1500}),
                ({"look_to_book_target": 1500}, {"look_to_book_target": 0}),
            ],
            key=str,
        )

"""authsvc's keys and audit events paged over real gRPC on loopback, on SQLite and PostgreSQL
(db_url): newest first, both ways."""

from __future__ import annotations

from typing import Any

import grpc

from authsvc.testing import ACTOR, error_of, new_account, new_key, running_authsvc
from tests.integration.auth_requests import SANDBOX
from travel.auth.v1 import auth_pb2 as pb


async def test_pagination_of_keys_and_audit(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        other = await new_account(stub, name="Other")
        await new_key(stub, other.id)
        ids = [(await new_key(stub, account.id, name=f"k{i}")).key.id for i in range(7)]
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=ids[3], actor=ACTOR))
        seen: list[str] = []
        token = ""
        pages = 0
        while True:
            resp = await stub.ListKeys(
                pb.ListKeysRequest(account_id=account.id, page_size=3, page_token=token, include_revoked=True)
            )
            seen += [k.id for k in resp.keys]
            pages += 1
            token = resp.next_page_token
            if not token:
                break
        assert sorted(seen) == sorted(ids) and len(seen) == 7 and pages == 3
        active = (await stub.ListKeys(pb.ListKeysRequest(account_id=account.id))).keys
        assert sorted(k.id for k in active) == sorted(set(ids) - {ids[3]})
        sandbox = (await stub.ListKeys(pb.ListKeysRequest(account_id=account.id, environment=SANDBOX))).keys
        assert list(sandbox) == []
        actions: list[str] = []
        token = ""
        while True:
            resp = await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, page_size=4, page_token=token)
            )
            actions += [e.action for e in resp.events]
            token = resp.next_page_token
            if not token:
                break
        assert actions == ["account.created"] + ["key.created"] * 7 + ["key.revoked"]
        _, etype, _ = await error_of(
            stub.ListKeys(pb.ListKeysRequest(account_id=account.id, page_token="!!"))
        )
        assert etype == "invalid_request"
        _, etype, _ = await error_of(stub.ListKeys(pb.ListKeysRequest(account_id=account.id, page_size=-1)))
        assert etype == "invalid_request"


async def _audit_pages(
    stub: Any, account_id: str, newest_first: bool, page_size: int, key_id: str = "", action: str = ""
) -> tuple[list[str], int]:
    """Every audit event id of a listing, page by page: (ids, pages)."""
    ids: list[str] = []
    token, pages = "", 0
    while True:
        resp = await stub.ListAuditEvents(
            pb.ListAuditEventsRequest(
                account_id=account_id,
                key_id=key_id,
                action=action,
                page_size=page_size,
                page_token=token,
                newest_first=newest_first,
            )
        )
        ids += [e.id for e in resp.events]
        pages += 1
        token = resp.next_page_token
        if not token:
            return ids, pages


async def test_audit_events_newest_first_pages_in_both_orders(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        other = await new_account(stub, name="Someone else")
        keys = [(await new_key(stub, account.id, name=f"k{i}")).key.id for i in range(6)]
        await new_key(stub, other.id)
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=keys[2], reason="test", actor=ACTOR))
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=keys[4], reason="test", actor=ACTOR))
        oldest, _ = await _audit_pages(stub, account.id, newest_first=False, page_size=100)
        assert len(oldest) == 9  # account.created, 6 x key.created, 2 x key.revoked
        default = await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))
        assert [e.id for e in default.events] == oldest  # unset newest_first: today's order
        newest = await stub.ListAuditEvents(
            pb.ListAuditEventsRequest(account_id=account.id, newest_first=True, page_size=1)
        )
        assert newest.events[0].action == "key.revoked" and newest.events[0].key_id == keys[4]
        # Keyset pages in either order, page sizes that do and do not divide the total: no event skipped
        # or repeated, none of another account.
        for size in (1, 2, 3, 4, 9, 10):
            up, up_pages = await _audit_pages(stub, account.id, newest_first=False, page_size=size)
            down, down_pages = await _audit_pages(stub, account.id, newest_first=True, page_size=size)
            assert up == oldest and down == oldest[::-1], size
            assert up_pages == down_pages == -(-9 // size), size
        # With filters too.
        revoked, _ = await _audit_pages(stub, account.id, True, 1, action="key.revoked")
        assert revoked == [oldest[-1], oldest[-2]]
        of_key, _ = await _audit_pages(stub, account.id, True, 1, key_id=keys[2])
        assert len(of_key) == 2 and of_key[-1] == oldest[3]  # revoked, then created
        # A token continues the order it was made for; sent with the other order it is refused.
        up_token = (
            await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id, page_size=2))
        ).next_page_token
        down_token = (
            await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, page_size=2, newest_first=True)
            )
        ).next_page_token
        for token, newest_first in ((up_token, True), (down_token, False)):
            code, etype, message = await error_of(
                stub.ListAuditEvents(
                    pb.ListAuditEventsRequest(
                        account_id=account.id, page_token=token, newest_first=newest_first
                    )
                )
            )
            assert code == grpc.StatusCode.INVALID_ARGUMENT and etype == "invalid_request"
            assert message.startswith("page_token:")
        _, etype, _ = await error_of(
            stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id, page_token="!!"))
        )
        assert etype == "invalid_request"

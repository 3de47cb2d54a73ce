"""PublishEvent enforces the commercial modes (issue 9): payment.* only for mode B accounts,
ledger.low_balance only for mode A, checked against the account in a real authsvc; a refused event is
not stored. Without --authsvc webhookd cannot know the mode and checks nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest

from authsvc.testing import ACTOR, running_authsvc
from svckit.errors import type_from_rpc_error
from tests.support import event_data
from travel.auth.v1 import auth_pb2
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server


async def publish(stub: webhooks_pb2_grpc.WebhookServiceStub, account_id: str, kind: str) -> pb.Event:
    resp = await stub.PublishEvent(
        pb.PublishEventRequest(
            account_id=account_id, environment=pb.ENVIRONMENT_LIVE, type=kind, data=event_data(kind)
        )
    )
    return resp.event  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def accounts_of_both_modes(
    sqlite_url: str,
) -> AsyncIterator[tuple[Webhookd, webhooks_pb2_grpc.WebhookServiceStub, dict[str, str]]]:
    """A real authsvc with a mode A and a mode B account, a webhookd asking it (no worker), and a stub."""
    async with running_authsvc(sqlite_url) as (auth_server, auth):
        accounts = {}
        for mode, pb_mode in (("A", auth_pb2.ACCOUNT_MODE_A), ("B", auth_pb2.ACCOUNT_MODE_B)):
            made = await auth.CreateAccount(
                auth_pb2.CreateAccountRequest(name=mode, mode=pb_mode, actor=ACTOR)
            )
            accounts[mode] = made.account.id
        wh = await run_server(
            Config(
                database=sqlite_url.replace(".db", "-wh.db"),
                listen="127.0.0.1:0",
                policy=Policy(allow_private=True),
                authsvc=f"127.0.0.1:{auth_server.port}",
            ),
            start_worker=False,
        )
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{wh.port}") as channel:
                yield wh, webhooks_pb2_grpc.WebhookServiceStub(channel), accounts
        finally:
            await wh.stop(0)


async def test_mode_only_kinds_follow_the_account_mode(sqlite_url: str) -> None:
    async with accounts_of_both_modes(sqlite_url) as (wh, stub, accounts):
        allowed = [
            ("B", "payment.succeeded"), ("B", "payment.failed"), ("B", "payment.refunded"),
            ("A", "ledger.low_balance"), ("A", "booking.confirmed"), ("B", "booking.confirmed"),
        ]  # fmt: skip
        for mode, kind in allowed:
            assert (await publish(stub, accounts[mode], kind)).type == kind
        refused = [
            ("A", "payment.succeeded"), ("A", "payment.failed"), ("A", "payment.refunded"),
            ("B", "ledger.low_balance"),
        ]  # fmt: skip
        for mode, kind in refused:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await publish(stub, accounts[mode], kind)
            etype, message = type_from_rpc_error(info.value)
            assert etype == "invalid_request" and kind in message, (mode, kind, message)
            listed = await stub.ListEvents(
                pb.ListEventsRequest(account_id=accounts[mode], environment=pb.ENVIRONMENT_LIVE, types=[kind])
            )
            assert list(listed.events) == []  # nothing stored
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await publish(stub, "acct_nosuchaccount", "payment.failed")
        assert type_from_rpc_error(info.value)[0] == "invalid_request"
    assert wh.accounts is not None and wh.accounts._client is None  # stop closed it

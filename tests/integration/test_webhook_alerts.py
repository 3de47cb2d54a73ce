"""Disable alerts: admin addresses come from authsvc (real gRPC server) with a configured fallback; the
e-mail goes over real SMTP (aiosmtpd); an alert that cannot be sent yet (SMTP unreachable or not
configured, no recipient) stays pending and goes out once it can."""

from __future__ import annotations

import datetime as dt
import pathlib
from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import grpc
import pytest
from aiosmtpd.controller import Controller

from authsvc._server import run_server as run_authsvc
from svckit.clock import FakeClock
from svckit.migrations import downgrade
from svckit.smtp import SmtpSettings
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from tests.support import free_port
from travel.auth.v1 import auth_pb2, auth_pb2_grpc
from webhookd._accounts import Accounts
from webhookd._mailer import Mailer
from webhookd._repository import DeliveryResult, EndpointRecord, SigningSecret
from webhookd._sql import SqlRepository
from webhookd.migrations import SCHEMA

NOW = dt.datetime(2026, 4, 1, tzinfo=dt.UTC)


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Any]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((sorted(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    port = free_port()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


async def _disable(repo: SqlRepository, account_id: str, endpoint_id: str = "") -> str:
    ep = EndpointRecord(endpoint_id or f"we_{account_id}", account_id, "live", "https://hooks.partner.test/h",
                        ["apikey.revoked"], "", EndpointStatus.ENABLED, "", NOW, NOW,
                        [SigningSecret("whsec_" + "B" * 44)])  # fmt: skip
    await repo.create_endpoint(ep)
    await repo.record_outcomes(
        [
            DeliveryResult(
                "msg_x",
                ep.id,
                None,
                DeliveryStatus.FAILED,
                None,
                False,
                disable_endpoint=True,
                disabled_reason="HTTP 500",
            )
        ],
        "wrk_test",
        NOW,
    )
    return ep.id


async def test_alert_goes_to_authsvc_admins_else_fallback(
    sqlite_url: str, tmp_path: pathlib.Path, smtp: tuple[Inbox, int]
) -> None:
    auth = await run_authsvc("127.0.0.1:0", f"sqlite+aiosqlite:///{tmp_path / 'auth.db'}")
    repo = await SqlRepository.open(sqlite_url)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{auth.port}") as channel:
            acct = await auth_pb2_grpc.AuthServiceStub(channel).CreateAccount(
                auth_pb2.CreateAccountRequest(
                    name="Partner", mode=auth_pb2.ACCOUNT_MODE_A,
                    admin_emails=["admin1@partner.test", "admin2@partner.test"],
                    actor=auth_pb2.Actor(user="t"),
                )
            )  # fmt: skip
        account_id = acct.account.id
        ep_known = await _disable(repo, account_id)
        ep_unknown = await _disable(repo, "acct_unknown")
        assert len(await repo.pending_alerts(10)) == 2
        mailer = Mailer(
            repo, FakeClock(NOW), SmtpSettings("127.0.0.1", smtp[1], "webhooks@svc.test"),
            lookup=Accounts(f"127.0.0.1:{auth.port}").admin_emails, fallback=["oncall@svc.test"],
        )  # fmt: skip
        assert await mailer.send_pending() == 2
        by_endpoint = {m["Subject"].split()[2]: (rcpts, m) for rcpts, m in smtp[0].messages}
        assert by_endpoint[ep_known][0] == ["admin1@partner.test", "admin2@partner.test"]
        assert by_endpoint[ep_unknown][0] == ["oncall@svc.test"]
        assert "HTTP 500" in by_endpoint[ep_known][1].get_payload()
        assert await repo.pending_alerts(10) == []
        assert await mailer.send_pending() == 0  # sent once, not again
    finally:
        await repo.close()
        await auth.stop(0)


async def test_unreachable_smtp_keeps_alert_pending(sqlite_url: str) -> None:
    repo = await SqlRepository.open(sqlite_url)
    try:
        await _disable(repo, "acct_1")
        mailer = Mailer(repo, FakeClock(NOW), SmtpSettings("127.0.0.1", free_port(), timeout=2),
                        fallback=["oncall@svc.test"])  # fmt: skip
        assert await mailer.send_pending() == 0
        assert len(await repo.pending_alerts(10)) == 1
    finally:
        await repo.close()


async def test_alert_written_without_smtp_goes_out_once_smtp_is_configured(
    sqlite_url: str, smtp: tuple[Inbox, int]
) -> None:
    repo = await SqlRepository.open(sqlite_url)
    try:
        endpoint_id = await _disable(repo, "acct_1")
        unconfigured = Mailer(repo, FakeClock(NOW), None, fallback=["oncall@svc.test"])
        assert await unconfigured.send_pending() == 0
        assert await unconfigured.send_pending() == 0
        assert [a.endpoint_id for a in await repo.pending_alerts(10)] == [endpoint_id]
        # The operator sets --smtp and restarts: the alert goes out, once.
        configured = Mailer(
            repo, FakeClock(NOW), SmtpSettings("127.0.0.1", smtp[1]), fallback=["oncall@svc.test"]
        )
        assert await configured.send_pending() == 1
        assert [(rcpts, m["Subject"].split()[2]) for rcpts, m in smtp[0].messages] == [
            (["oncall@svc.test"], endpoint_id)
        ]
        assert await repo.pending_alerts(10) == []
        assert await configured.send_pending() == 0
    finally:
        await repo.close()


async def test_alerts_without_recipients_wait_and_hold_up_no_other(
    sqlite_url: str, smtp: tuple[Inbox, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("webhookd._mailer.PAGE", 2)  # the stuck alerts fill more than one page
    repo = await SqlRepository.open(sqlite_url)
    try:
        stuck = [await _disable(repo, "acct_nobody", f"we_stuck{i}") for i in range(5)]
        reachable = await _disable(repo, "acct_known")

        async def lookup(account_id: str) -> list[str]:
            return ["admin@known.test"] if account_id == "acct_known" else []

        config = SmtpSettings("127.0.0.1", smtp[1])
        assert await Mailer(repo, FakeClock(NOW), config, lookup=lookup).send_pending() == 1
        assert [m["Subject"].split()[2] for _, m in smtp[0].messages] == [reachable]
        assert sorted(a.endpoint_id for a in await repo.pending_alerts(10)) == stuck
        # A fallback address configured later: the waiting alerts go out.
        mailer = Mailer(repo, FakeClock(NOW), config, lookup=lookup, fallback=["oncall@svc.test"])
        assert await mailer.send_pending() == 5
        assert await repo.pending_alerts(10) == []
    finally:
        await repo.close()


async def test_alerts_the_previous_release_marked_sent_unsent_are_pending_again(sqlite_url: str) -> None:
    import sqlalchemy as sa

    repo = await SqlRepository.open(sqlite_url)
    try:
        await _disable(repo, "acct_a")
        await _disable(repo, "acct_b")
        await _disable(repo, "acct_c")
        # A database as revision 0003 left it, with what the previous code wrote: marked sent with the
        # reason it was not.
        await downgrade(repo.engine, SCHEMA, "0003")
        async with repo.engine.begin() as conn:
            for account_id, error in (
                ("acct_a", "no SMTP server configured"),
                ("acct_b", "no admin addresses known"),
                ("acct_c", ""),
            ):
                await conn.execute(
                    sa.text("UPDATE wh_alerts SET sent_at = 1, error = :e WHERE account_id = :a"),
                    {"e": error, "a": account_id},
                )
    finally:
        await repo.close()
    repo = await SqlRepository.open(sqlite_url)
    try:
        assert sorted(a.account_id for a in await repo.pending_alerts(10)) == ["acct_a", "acct_b"]
    finally:
        await repo.close()

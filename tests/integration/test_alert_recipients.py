"""Alert e-mails reach the account's people: a portal-only account (its owner made through the identity
service, as the portal does; no extra address) gets the disable e-mail at the owner's address after its
endpoint fails every attempt of the retry schedule (real authsvc, webhookd, portal and SMTP, a
FakeClock for the schedule); an extra address added on the portal's Notifications page gets the next
one too; a viewer may neither see nor change that page. And authsvc's GetAlertRecipients on its own:
owners and admins who accepted their invitation, never a pending invitation, a removed user, a
developer or a viewer."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from email import message_from_bytes
from typing import Any

import grpc
import httpx
import pytest
from aiosmtpd.controller import Controller
from google.protobuf import field_mask_pb2
from sanic import Sanic

from authsvc._server import AuthServer
from authsvc._server import run_server as run_authsvc
from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from portal.app import PortalConfig, create_app
from svckit.clock import FakeClock
from svckit.smtp import SmtpSettings
from svckit.webserver import start
from tests.support import csrf_of, event_data, free_port
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._accounts import Accounts
from webhookd._server import Config, Webhookd
from webhookd._server import run_server as run_webhookd
from webhookd.testing import Receiver

PASSWORD = "a long enough passphrase"
T0 = dt.datetime(2026, 5, 4, 9, 0, tzinfo=dt.UTC)
DELAYS = [dt.timedelta(minutes=m) for m in (1, 5, 30, 120, 360, 1440)]


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Any]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((sorted(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"

    async def wait_for(self, count: int) -> list[tuple[list[str], Any]]:
        """The first ``count`` disable e-mails (the failing ones before them go to the same people)."""
        for _ in range(500):
            disabled = [m for m in self.messages if "failing" not in m[1]["Subject"]]
            if len(disabled) >= count:
                return disabled
            await asyncio.sleep(0.02)
        raise AssertionError(f"{len(self.messages)} e-mails arrived, not {count} disable e-mails")


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    port = free_port()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


@dataclass
class Stack:
    url: str
    account_id: str
    auth: auth_pb2_grpc.AuthServiceStub
    ids: identity_pb2_grpc.IdentityServiceStub
    hooks: webhooks_pb2_grpc.WebhookServiceStub
    webhookd: Webhookd
    clock: FakeClock
    receiver: Receiver

    async def join(self, email: str, role: ipb.UserRole.ValueType) -> httpx.AsyncClient:
        """A browser signed in as a new user of ``role``: invited by an operator, accepted on the portal's
        invitation page (as the portal's own users are made)."""
        made = await self.ids.CreateInvite(
            ipb.CreateInviteRequest(account_id=self.account_id, email=email, role=role, actor=ACTOR)
        )
        client = httpx.AsyncClient(base_url=self.url, timeout=30)
        form = await client.get(f"/invite/{made.token}")
        accepted = await client.post(
            f"/invite/{made.token}", data={"csrf": csrf_of(form.text), "password": PASSWORD}
        )
        assert accepted.status_code == 303, accepted.text
        return client

    async def disable_endpoint(self) -> str:
        """A live endpoint of the account that fails every attempt of the schedule, which disables it."""
        reg = await self.hooks.RegisterEndpoint(
            wpb.RegisterEndpointRequest(
                account_id=self.account_id,
                environment=wpb.ENVIRONMENT_LIVE,
                url=self.receiver.url(f"/{uuid.uuid4().hex}"),
                events=["booking.confirmed"],
            )
        )
        await self.hooks.PublishEvent(
            wpb.PublishEventRequest(
                account_id=self.account_id,
                environment=wpb.ENVIRONMENT_LIVE,
                type="booking.confirmed",
                state="confirmed",
                data=event_data("booking.confirmed"),
            )
        )
        due = self.clock.now()
        for delay in [*DELAYS, None]:
            self.clock.set(due)
            assert await self.webhookd.worker.run_once() == 1
            due += delay or dt.timedelta()
        got = await self.hooks.GetEndpoint(
            wpb.GetEndpointRequest(
                account_id=self.account_id, environment=wpb.ENVIRONMENT_LIVE, endpoint_id=reg.endpoint.id
            )
        )
        assert got.endpoint.status == wpb.ENDPOINT_STATUS_DISABLED
        endpoint_id: str = reg.endpoint.id
        return endpoint_id


@pytest.fixture
async def stack(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, smtp: tuple[Inbox, int]
) -> AsyncIterator[Stack]:
    monkeypatch.setattr(Sanic, "test_mode", True)
    receiver = Receiver(None, responder=lambda _r: 500).start()
    authsvc: AuthServer = await run_authsvc("127.0.0.1:0", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    clock = FakeClock(T0)
    webhookd = await run_webhookd(
        Config(
            database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
            smtp=SmtpSettings("127.0.0.1", smtp[1], "webhooks@svc.test"),
            authsvc=f"127.0.0.1:{authsvc.port}",
        ),
        clock=clock,
        start_worker=False,
    )
    config = PortalConfig(
        authsvc=f"127.0.0.1:{authsvc.port}", webhookd=f"127.0.0.1:{webhookd.port}", csrf_key=b"n" * 32
    )
    running = await start(create_app(config, name=f"portal_{uuid.uuid4().hex[:8]}"), ["127.0.0.1:0"])
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{authsvc.port}") as a,
            grpc.aio.insecure_channel(f"127.0.0.1:{webhookd.port}") as w,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(a)
            # A portal-only account: no admin_emails, only the users the portal has.
            account = await auth.CreateAccount(
                apb.CreateAccountRequest(name="Portal Only", mode=apb.ACCOUNT_MODE_A, actor=ACTOR)
            )
            assert list(account.account.admin_emails) == []
            yield Stack(
                f"http://127.0.0.1:{running.ports[0]}",
                account.account.id,
                auth,
                identity_pb2_grpc.IdentityServiceStub(a),
                webhooks_pb2_grpc.WebhookServiceStub(w),
                webhookd,
                clock,
                receiver,
            )
    finally:
        await running.stop(1)
        await webhookd.stop(0)
        await authsvc.stop(0)
        receiver.stop()


async def test_disable_alert_reaches_the_portal_owner_and_the_extra_address_set_in_the_portal(
    stack: Stack, smtp: tuple[Inbox, int]
) -> None:
    inbox = smtp[0]
    owner = await stack.join("Owner@Portal-Only.example", ipb.USER_ROLE_OWNER)
    viewer = await stack.join("viewer@portal-only.example", ipb.USER_ROLE_VIEWER)

    # No extra address: the disable e-mail goes to the owner (a viewer is not alerted).
    first = await stack.disable_endpoint()
    ((rcpts, mail),) = await inbox.wait_for(1)
    assert rcpts == ["owner@portal-only.example"]
    assert first in mail["Subject"] and "disabled" in mail["Subject"]
    assert "500" in mail.get_payload()

    # The owner adds an extra address on the Notifications page (Post/Redirect/Get, a notice once).
    page = await owner.get("/live/notifications")
    assert page.status_code == 200
    assert "owner@portal-only.example" in page.text and 'href="/live/notifications"' in page.text
    added = await owner.post(
        "/live/notifications/add", data={"csrf": csrf_of(page.text), "email": "oncall@partner.example"}
    )
    assert added.status_code == 303 and added.headers["location"] == "/live/notifications"
    shown = await owner.get(added.headers["location"])
    assert "oncall@partner.example now receives alert e-mails." in shown.text
    got = await stack.auth.GetAccount(apb.GetAccountRequest(account_id=stack.account_id))
    assert list(got.account.admin_emails) == ["oncall@partner.example"]

    # A viewer neither sees the page (nor its link) nor changes it.
    view = await viewer.get("/live/notifications")
    assert view.status_code == 403
    assert 'href="/live/notifications"' not in (await viewer.get("/live/")).text
    token = csrf_of((await viewer.get("/live/me")).text)
    for action in ("add", "remove"):
        refused = await viewer.post(
            f"/live/notifications/{action}", data={"csrf": token, "email": "oncall@partner.example"}
        )
        assert refused.status_code == 403, action
    got = await stack.auth.GetAccount(apb.GetAccountRequest(account_id=stack.account_id))
    assert list(got.account.admin_emails) == ["oncall@partner.example"]

    # The next disable e-mail reaches the owner and the extra address.
    second = await stack.disable_endpoint()
    messages = await inbox.wait_for(2)
    assert messages[1][0] == ["oncall@partner.example", "owner@portal-only.example"]
    assert second in messages[1][1]["Subject"]

    # The change is in the audit trail, in the owner's name, with the addresses before and after.
    me = await stack.ids.GetSession(ipb.GetSessionRequest(session_token=owner.cookies["portal_session"]))
    trail = await stack.auth.ListAuditEvents(
        apb.ListAuditEventsRequest(account_id=stack.account_id, action="account.updated")
    )
    (event,) = trail.events
    assert (event.actor.user, event.actor.user_id) == ("owner@portal-only.example", me.user.id)
    assert list(event.before["admin_emails"]) == [] and list(event.after["admin_emails"]) == [
        "oncall@partner.example"
    ]
    for client in (owner, viewer):
        await client.aclose()


async def _user(
    ids: identity_pb2_grpc.IdentityServiceStub, account_id: str, email: str, role: ipb.UserRole.ValueType
) -> str:
    made = await ids.CreateInvite(
        ipb.CreateInviteRequest(account_id=account_id, email=email, role=role, actor=ACTOR)
    )
    accepted = await ids.AcceptInvite(ipb.AcceptInviteRequest(token=made.token, password=PASSWORD))
    token: str = accepted.session_token
    return token


async def test_get_alert_recipients_owners_admins_and_extra_addresses(tmp_path: pathlib.Path) -> None:
    async with running_authsvc(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            other = await new_account(stub, name="Other")

            async def recipients(account_id: str) -> tuple[list[str], list[str]]:
                got = await stub.GetAlertRecipients(apb.GetAlertRecipientsRequest(account_id=account_id))
                return list(got.recipients), list(got.portal_recipients)

            assert await recipients(account.id) == ([], [])
            owner = await _user(ids, account.id, "owner@acme.example", ipb.USER_ROLE_OWNER)
            await _user(ids, account.id, "admin@acme.example", ipb.USER_ROLE_ADMIN)
            await _user(ids, account.id, "dev@acme.example", ipb.USER_ROLE_DEVELOPER)
            await _user(ids, account.id, "viewer@acme.example", ipb.USER_ROLE_VIEWER)
            await _user(ids, other.id, "elsewhere@other.example", ipb.USER_ROLE_OWNER)
            # A pending invitation is nobody yet.
            await ids.CreateInvite(
                ipb.CreateInviteRequest(
                    account_id=account.id, email="pending@acme.example", role=ipb.USER_ROLE_ADMIN, actor=ACTOR
                )
            )
            await stub.UpdateAccount(
                apb.UpdateAccountRequest(
                    account_id=account.id,
                    update_mask=field_mask_pb2.FieldMask(paths=["admin_emails"]),
                    admin_emails=["Ops@Acme.example", "OWNER@acme.example"],
                    actor=ACTOR,
                )
            )
            everyone = ["admin@acme.example", "Ops@Acme.example", "owner@acme.example"]
            assert await recipients(account.id) == (everyone, ["admin@acme.example", "owner@acme.example"])

            # A removed admin is no longer alerted; a developer made admin is.
            users = (await ids.ListUsers(ipb.ListUsersRequest(session_token=owner))).users
            by_email = {u.email: u.id for u in users}
            await ids.RemoveUser(
                ipb.RemoveUserRequest(session_token=owner, user_id=by_email["admin@acme.example"])
            )
            await ids.SetUserRole(
                ipb.SetUserRoleRequest(
                    session_token=owner, user_id=by_email["dev@acme.example"], role=ipb.USER_ROLE_ADMIN
                )
            )
            assert (await recipients(account.id))[0] == [
                "dev@acme.example",
                "Ops@Acme.example",
                "owner@acme.example",
            ]

            # webhookd's client asks this RPC.
            accounts = Accounts(f"127.0.0.1:{server.port}")
            try:
                assert await accounts.alert_recipients(account.id) == [
                    "dev@acme.example",
                    "Ops@Acme.example",
                    "owner@acme.example",
                ]
            finally:
                await accounts.close()

            code, etype, _ = await error_of(
                stub.GetAlertRecipients(apb.GetAlertRecipientsRequest(account_id="acct_nope"))
            )
            assert (code, etype) == (grpc.StatusCode.NOT_FOUND, "not_found")
            _, etype, _ = await error_of(stub.GetAlertRecipients(apb.GetAlertRecipientsRequest()))
            assert etype == "invalid_request"


async def test_webhookd_falls_back_to_admin_emails_on_an_authsvc_without_the_rpc() -> None:
    """An authsvc of the previous release answers UNIMPLEMENTED: its GetAccount's admin_emails, as before."""

    async def get_account(request: apb.GetAccountRequest, context: Any) -> apb.GetAccountResponse:
        return apb.GetAccountResponse(
            account=apb.Account(id=request.account_id, admin_emails=["ops@old.example"])
        )

    old_release = grpc.method_handlers_generic_handler(
        "travel.auth.v1.AuthService",
        {
            "GetAccount": grpc.unary_unary_rpc_method_handler(
                get_account,
                request_deserializer=apb.GetAccountRequest.FromString,
                response_serializer=apb.GetAccountResponse.SerializeToString,
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((old_release,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    accounts = Accounts(f"127.0.0.1:{port}")
    try:
        assert await accounts.alert_recipients("acct_old") == ["ops@old.example"]
    finally:
        await accounts.close()
        await server.stop(0)

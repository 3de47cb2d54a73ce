"""The portal over real HTTP (httpx) against a real authsvc and webhookd on loopback, all in this process:
the ``stack`` and ``receiver`` fixtures and helpers of the test_portal_*.py modules beside this one.
The browser journey is tests/e2e/test_portal_browser.py."""

from __future__ import annotations

import html
import pathlib
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from sanic import Sanic

from authsvc._server import run_server as run_authsvc
from portal.app import PortalConfig, create_app
from svckit.webserver import start
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config
from webhookd._server import run_server as run_webhookd
from webhookd.testing import Receiver

PASSWORD = "a long enough passphrase"


OPS = apb.Actor(user="ops:test")


@dataclass
class Stack:
    url: str
    account_id: str
    auth: auth_pb2_grpc.AuthServiceStub
    ids: identity_pb2_grpc.IdentityServiceStub
    hooks: webhooks_pb2_grpc.WebhookServiceStub

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=30)

    async def join(self, email: str, role: ipb.UserRole.ValueType = ipb.USER_ROLE_OWNER) -> httpx.AsyncClient:
        """A client signed in as a new user of ``role``, through the invitation page."""
        made = await self.ids.CreateInvite(
            ipb.CreateInviteRequest(account_id=self.account_id, email=email, role=role, actor=OPS)
        )
        client = self.client()
        form = await client.get(f"/invite/{made.token}")
        accepted = await client.post(
            f"/invite/{made.token}", data={"csrf": csrf_of(form.text), "password": PASSWORD}
        )
        assert accepted.status_code == 303, accepted.text
        return client


@pytest.fixture
async def stack(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    # Sanic rewrites its own request reader when an app starts; test mode lets a second app of this
    # process start from the original again.
    monkeypatch.setattr(Sanic, "test_mode", True)
    authsvc = await run_authsvc("127.0.0.1:0", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    webhookd = await run_webhookd(
        Config(
            database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
        ),
    )
    config = PortalConfig(
        authsvc=f"127.0.0.1:{authsvc.port}", webhookd=f"127.0.0.1:{webhookd.port}", csrf_key=b"s" * 32
    )
    running = await start(create_app(config, name=f"portal_{uuid.uuid4().hex[:8]}"), ["127.0.0.1:0"])
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{authsvc.port}") as a,
            grpc.aio.insecure_channel(f"127.0.0.1:{webhookd.port}") as w,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(a)
            account = await auth.CreateAccount(apb.CreateAccountRequest(name="Acme", actor=OPS))
            yield Stack(
                f"http://127.0.0.1:{running.ports[0]}",
                account.account.id,
                auth,
                identity_pb2_grpc.IdentityServiceStub(a),
                webhooks_pb2_grpc.WebhookServiceStub(w),
            )
    finally:
        await running.stop(1)
        await webhookd.stop(0)
        await authsvc.stop(0)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(None).start()
    yield r
    r.stop()


def _next_page(page: str) -> str:
    """The query string of the "Next page" link ("" when there is none)."""
    found = re.search(r'href="(\?[^"]*)" data-testid="next-page"', page)
    return html.unescape(found[1]) if found else ""

"""The real processes and the headless Chromium of tests/e2e/test_portal_browser.py (and
tests/e2e/test_portal_walls.py): the ``stack`` and ``browser`` fixtures, and the helpers that sign in,
take screenshots and look for secrets."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import ssl
import tempfile
from base64 import b32decode, b64encode, urlsafe_b64decode, urlsafe_b64encode
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from typing import Any
from urllib.parse import quote_plus

import grpc
import httpx
import pyotp
import pytest
import trustme
from aiosmtpd.controller import Controller
from google.protobuf.json_format import MessageToJson

from edge.testing import SANDBOX_HOST, edge_args
from svckit.secretbox import new_key as new_secrets_key
from tests.support import ROOT, ServiceProcess, free_port, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from webhookd.testing import Receiver

CHROMIUM = pathlib.Path("/usr/bin/chromium")


# A relative PORTAL_SCREENSHOTS is taken from the project root.
SHOTS = (
    ROOT / os.environ["PORTAL_SCREENSHOTS"]
    if os.environ.get("PORTAL_SCREENSHOTS")
    else pathlib.Path(tempfile.gettempdir()) / "portal-shots"
)


PASSWORD = "a long enough passphrase"


@dataclass
class Stack:
    portal: str
    portal_metrics: str
    edge_sandbox: str
    receiver: Receiver
    authsvc: str
    account_id: str
    tmp: pathlib.Path  # every database file (with -wal/-shm) and process log of the run
    inbox: Inbox = field(default_factory=lambda: Inbox())
    webhookd: str = ""  # its gRPC target (events are published there)


class Inbox:
    """An aiosmtpd handler keeping every message it receives."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("portal")) as started:
        yield started


@contextmanager
def running_stack(tmp: pathlib.Path) -> Iterator[Stack]:
    """authsvc, webhookd, edge and portal processes, an HTTPS receiver and an SMTP server, in ``tmp``
    (also tests/e2e/test_portal_walls.py's)."""
    ca = trustme.CA()
    ca_file = tmp / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server_ctx)
    receiver = Receiver(server_ctx).start()
    inbox = Inbox()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        smtp_port = probe.getsockname()[1]
    smtp = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    key_file = tmp / "secrets.key"
    key_file.write_text(new_secrets_key())
    webhookd_key_file = tmp / "webhookd.key"
    webhookd_key_file.write_text(new_secrets_key())
    procs: list[ServiceProcess] = []
    authsvc_port = free_port()  # webhookd asks authsvc who gets alert e-mails; authsvc starts second
    portal_port = free_port()  # webhookd's alert e-mails link the portal, which starts last
    try:
        webhookd = start_service(
            "webhookd", tmp, sqlite_url(tmp, "webhookd.db"),
            "--allow-private-targets", "--ca-bundle", str(ca_file), "--poll-seconds", "0.2",
            "--secrets-key-file", str(webhookd_key_file), "--smtp", f"127.0.0.1:{smtp_port}",
            "--authsvc", f"127.0.0.1:{authsvc_port}", "--portal-url", f"http://127.0.0.1:{portal_port}",
        )  # fmt: skip
        procs.append(webhookd)
        authsvc = start_service(
            "authsvc", tmp, sqlite_url(tmp, "authsvc.db"),
            "--webhookd", webhookd.grpc_target, "--secrets-key-file", str(key_file),
            "--listen", f"127.0.0.1:{authsvc_port}",
        )  # fmt: skip
        procs.append(authsvc)
        edge = ServiceProcess(
            "edge", edge_args(authsvc.grpc_target, webhookd.grpc_target, sqlite_url(tmp, "edge.db"))
        ).start(tmp / "edge.log")
        procs.append(edge)
        portal = ServiceProcess(
            "portal",
            ["--listen", f"127.0.0.1:{portal_port}", "--metrics-listen", "127.0.0.1:0",
             "--authsvc", authsvc.grpc_target, "--webhookd", webhookd.grpc_target,
             "--smtp-host", "127.0.0.1", "--smtp-port", str(smtp_port)],
        ).start(tmp / "portal.log")  # fmt: skip
        procs.append(portal)
        with grpc.insecure_channel(authsvc.grpc_target) as channel:
            account = auth_pb2_grpc.AuthServiceStub(channel).CreateAccount(
                apb.CreateAccountRequest(name="Acme Travel", actor=apb.Actor(user="ops:e2e"))
            )
        yield Stack(
            portal.ports["url"],
            f"http://127.0.0.1:{portal.ports['metrics_port']}/metrics",
            f"http://127.0.0.1:{edge.ports['sandbox_port']}",
            receiver,
            authsvc.grpc_target,
            account.account.id,
            tmp,
            inbox,
            webhookd.grpc_target,
        )
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()
        smtp.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@contextmanager
def chromium() -> Iterator[Any]:
    """The system's Chromium, headless, through Playwright (never a browser Playwright downloads)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield chromium
        finally:
            chromium.close()


def invite(stack: Stack, email: str, role: ipb.UserRole.ValueType) -> str:
    with grpc.insecure_channel(stack.authsvc) as channel:
        made = identity_pb2_grpc.IdentityServiceStub(channel).CreateInvite(
            ipb.CreateInviteRequest(
                account_id=stack.account_id, email=email, role=role, actor=apb.Actor(user="ops:e2e")
            )
        )
    return f"{stack.portal}/invite/{made.token}"


def join(browser: Any, stack: Stack, email: str, role: ipb.UserRole.ValueType) -> Any:
    """A browser context signed in as a new user of ``role`` (through the invitation page)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(invite(stack, email, role))
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/$"))
    return context, page


def enrol_totp(page: Any, stack: Stack) -> pyotp.TOTP:
    """Turn on two-factor sign-in for the signed-in live user from /live/me: the authenticator it set up
    (its setup key is shown beside the QR code)."""
    page.goto(f"{stack.portal}/live/me")
    page.click("text=Set up an authenticator app")
    totp = pyotp.TOTP(page.text_content("[data-testid=totp-key]").strip())
    page.fill("input[name=code]", totp.now())
    page.click("text=Turn on")
    page.wait_for_selector("text=Two-factor sign-in: on")
    return totp


def shot(page: Any, name: str, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def edge_get(stack: Stack, secret: str) -> httpx.Response:
    return httpx.get(
        f"{stack.edge_sandbox}/v1/account",
        headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}", "Accept": "application/json"},
        timeout=5,
    )


def _csrf(page: Any) -> str:
    return str(page.get_attribute("input[name=csrf]", "value"))


def _post(page: Any, path: str, form: dict[str, str]) -> int:
    """A form POST from inside the signed-in browser (its cookies, same origin)."""
    return int(page.request.post(path, form=form, max_redirects=0).status)


def _forms(secret: str) -> set[bytes]:
    """``secret`` as it could be written down: raw, URL-encoded, hex and base64, and the same for the
    random bytes behind it (a ``ps_``/``inv_`` token's base64url tail, a TOTP seed's base32)."""
    raw = secret.encode()
    found = {raw, quote_plus(secret).encode(), raw.hex().encode(), b64encode(raw), urlsafe_b64encode(raw)}
    prefix, _, tail = secret.partition("_")
    if prefix in ("ps", "inv"):
        inner = urlsafe_b64decode(tail + "=" * (-len(tail) % 4))
    elif re.fullmatch(r"[A-Z2-7]{16,}", secret):
        inner = b32decode(secret)
        found.add(secret.lower().encode())
    else:
        inner = b""
    if inner:
        found |= {inner, inner.hex().encode(), b64encode(inner).rstrip(b"="), urlsafe_b64encode(inner)}
    return found


def _audit_trail(stack: Stack) -> bytes:
    """Every audit event of the account, as the API gives them."""
    out, page_token = [], ""
    with grpc.insecure_channel(stack.authsvc) as channel:
        audit = auth_pb2_grpc.AuthServiceStub(channel)
        while True:
            got = audit.ListAuditEvents(
                apb.ListAuditEventsRequest(account_id=stack.account_id, page_size=100, page_token=page_token)
            )
            out += [MessageToJson(e).encode() + e.SerializeToString() for e in got.events]
            if not got.next_page_token:
                return b"\n".join(out)
            page_token = got.next_page_token

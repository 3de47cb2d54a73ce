"""The partner package as a partner gets it: built by scripts/build_partner_package, installed with pip
into a fresh venv in a directory outside the repository (no system site-packages, no PYTHONPATH, run from
that directory), where no server library is importable; then docs/sandbox.md's walk-through against a
running sandbox (authsvc, webhookd, edge): the venv's ``svc listen`` forwarding to each receiver example
of examples/receivers (copied out of the repository and run with the venv's Python, or Node), ``svc
trigger booking.confirmed``, and the receiver printing that it verified the delivery (and refusing a
forged one). Also ``svc trigger``'s line for an account whose endpoint is disabled: its delivery is held,
not sent."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from edge.testing import SANDBOX_HOSTS, edge_args
from svcctl.client import create_demo_key
from svckit.signing import SignatureScheme, delivery_headers, new_secret
from tests.support import ROOT, ServiceProcess, built_wheel, free_port, sqlite_url, start_service
from tests.support import VenvOutside as PartnerEnv
from webhookd.testing import Receiver

EXAMPLES = ROOT / "examples" / "receivers"
SERVER_LIBRARIES = ("sanic", "sqlalchemy", "grpc", "alembic", "redis", "opentelemetry", "svckit", "svccli")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The wheel scripts/build_partner_package builds, once per session."""
    return built_wheel("build_partner_package.py", tmp_path_factory.mktemp("partner-dist"), "svc_partner")


@pytest.fixture(scope="session")
def partner(tmp_path_factory: pytest.TempPathFactory, wheel: pathlib.Path) -> PartnerEnv:
    # standardwebhooks: for the receiver example that uses it (a partner's own choice of library).
    return PartnerEnv.made(tmp_path_factory.mktemp("partner-home"), str(wheel), "standardwebhooks")


def test_the_package_installs_alone_and_carries_no_server(partner: PartnerEnv) -> None:
    where = partner.python("import svc_partner; print(svc_partner.__file__)")
    assert where.returncode == 0, where.stderr
    assert pathlib.Path(where.stdout.decode().strip()).is_relative_to(partner.venv)
    for name in SERVER_LIBRARIES:
        refused = partner.python(f"import {name}")
        assert refused.returncode == 1 and b"ModuleNotFoundError" in refused.stderr, name
    helper = partner.run(str(partner.venv / "bin" / "svc"), "--help")
    assert helper.returncode == 0 and b"listen" in helper.stdout
    # The verification helper, as docs/webhooks.md shows it, on a delivery signed with each scheme.
    secret = new_secret()
    body = b'{"id":"evt_1","type":"booking.confirmed"}'
    for scheme in SignatureScheme:
        headers = delivery_headers([secret], body, "evt_1", time.time(), scheme)
        code = (
            "import json, sys; from svc_partner import verify_delivery, WebhookVerificationError; "
            "h, s = json.loads(sys.argv[1]), sys.argv[2]; body = sys.stdin.buffer.read(); "
            "print(verify_delivery(body, h, [s]).scheme)\n"
            "try:\n    verify_delivery(body + b' ', h, [s])\n"
            "except WebhookVerificationError:\n    print('refused')"
        )
        out = partner.run(
            str(partner.venv / "bin" / "python"), "-c", code, json.dumps(headers), secret, stdin=body
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.decode().split() == [
            "standard" if scheme is SignatureScheme.STANDARD else "stripe",
            "refused",
        ]


# -- against a running sandbox -------------------------------------------------------------------------
@dataclass
class Stack:
    authsvc: str
    webhookd: str
    base: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("partner-stack")
    procs: list[ServiceProcess] = []
    try:
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"), "--poll-seconds", "0.1",
            "--allow-private-targets", "--allow-http",
        )  # fmt: skip
        procs.append(wh)
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        host = f"127.0.0.1:{free_port()}"
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge.db"), None,
                "--sandbox-listen", host, "--sandbox-hosts", f"{SANDBOX_HOSTS},{host}",
                "--rate-limit-sandbox", "0",
            ),
        ).start(tmp / "edge.log")  # fmt: skip
        procs.append(edge)
        yield Stack(auth.grpc_target, wh.grpc_target, f"http://{host}")
    finally:
        for proc in reversed(procs):
            proc.terminate()


class Lines:
    """A process started in the partner's directory; its stdout collected line by line."""

    def __init__(self, partner: PartnerEnv, *args: str, **env: str) -> None:
        self.proc = subprocess.Popen(
            list(args), cwd=partner.home, env={**partner.env, **env},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    async def line_with(self, text: str, within: float = 20) -> str:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = [line for line in self.lines if text in line]
            if found:
                return found[0]
            await asyncio.sleep(0.05)
        raise AssertionError(f"no line with {text!r}; got {self.lines}; exit code {self.proc.poll()}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.reader.join(10)
        assert self.proc.stderr is not None
        return "".join(self.lines) + self.proc.stderr.read()


async def forged_is_refused(url: str, scheme: str) -> None:
    """POST a delivery signed with another secret until the receiver is up; it must answer 400."""
    body = b'{"id":"evt_forged","type":"booking.confirmed"}'
    headers = delivery_headers([new_secret()], body, "evt_forged", time.time(), SignatureScheme(scheme))
    deadline = time.monotonic() + 20
    async with httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                resp = await http.post(url, content=body, headers=headers)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
    assert resp.status_code == 400, resp.text


RECEIVERS = [
    ("receiver_svc_partner.py", "stripe"),
    ("receiver_svc_partner.py", "standard"),
    ("receiver_hmac.py", "stripe"),
    ("receiver_standardwebhooks.py", "standard"),
    ("receiver.mjs", "stripe"),
    ("receiver.mjs", "standard"),
]


@pytest.mark.parametrize(("example", "scheme"), RECEIVERS, ids=[f"{e}-{s}" for e, s in RECEIVERS])
async def test_walkthrough_svc_listen_to_a_receiver_example(
    partner: PartnerEnv, stack: Stack, example: str, scheme: str
) -> None:
    if example.endswith(".mjs") and shutil.which("node") is None:
        pytest.skip("node is not installed")
    key = (await create_demo_key(stack.authsvc, None))["secret"]
    svc = str(partner.venv / "bin" / "svc")
    base = ["--base-url", stack.base]
    shutil.copy(EXAMPLES / example, partner.home / example)  # the partner's copy, outside the repository
    port = free_port()
    url = f"http://127.0.0.1:{port}/webhooks"
    listen = Lines(
        partner, svc, *base, "listen", "--forward-to", url, "--signature-scheme", scheme, SVC_API_KEY=key
    )
    receiver: Lines | None = None
    try:
        secret = (await listen.line_with("signing secret is")).split("secret is ")[1].split()[0]
        await listen.line_with("Ready")
        runner = "node" if example.endswith(".mjs") else str(partner.venv / "bin" / "python")
        receiver = Lines(partner, runner, example, secret, PORT=str(port))
        await forged_is_refused(url, scheme)
        await receiver.line_with("refused:")

        trig = await asyncio.to_thread(
            partner.run, svc, *base, "--api-key", key, "trigger", "booking.confirmed"
        )
        assert trig.returncode == 0, trig.stderr
        out = trig.stdout.decode()
        assert out.startswith("Triggered booking.confirmed: evt_"), out
        assert "(no endpoint subscribed, or none whose filter it matches; on the stream)" in out
        event_id = out.split(": ")[1].split()[0]

        assert (await receiver.line_with(f"verified: {event_id}")).split() == [
            "verified:", event_id, "booking.confirmed"
        ]  # fmt: skip
        assert "[204]" in await listen.line_with(event_id)
    finally:
        listen_out = listen.stop()
        receiver_out = receiver.stop() if receiver else ""
    assert key not in listen_out + receiver_out


async def test_trigger_says_a_disabled_endpoints_delivery_is_held(partner: PartnerEnv, stack: Stack) -> None:
    """An endpoint disabled the real way (seven failed attempts, brought forward by the sandbox clock):
    ``svc trigger`` counted its delivery as sent ("1 endpoint(s)"); it is held until the endpoint is
    enabled, and the line says so."""
    key = (await create_demo_key(stack.authsvc, None))["secret"]
    svc = [str(partner.venv / "bin" / "svc"), "--base-url", stack.base, "--api-key", key]
    failing = Receiver(None, responder=lambda _r: 500).start()
    try:
        async with httpx.AsyncClient(base_url=stack.base, timeout=30) as http:

            def hdrs(post: bool = False) -> dict[str, str]:
                out = {"Authorization": f"Svc {key}"}
                return {**out, "Idempotency-Key": f"held-{time.time_ns()}"} if post else out

            created = await http.post(
                "/v1/webhooks/endpoints", headers=hdrs(True),
                json={"url": failing.url("/hook"), "events": ["booking.confirmed"]},
            )  # fmt: skip
            assert created.status_code == 201, created.text
            endpoint_id = created.json()["id"]
            first = await asyncio.to_thread(partner.run, *svc, "trigger", "booking.confirmed")
            assert b"(delivering to 1 endpoint; on the stream)" in first.stdout, first.stdout + first.stderr
            event_id = first.stdout.decode().split(": ")[1].split()[0]

            async def attempts() -> int:
                resp = await http.get("/v1/webhooks/deliveries", params={"event": event_id}, headers=hdrs())
                [d] = resp.json()["data"]
                return int(d["attemptCount"]) if d["status"] in ("pending", "failed") else 0

            for n, by in enumerate(("1m", "5m", "30m", "2h", "6h", "24h", ""), start=1):
                deadline = time.monotonic() + 20
                while await attempts() < n:
                    assert time.monotonic() < deadline, f"attempt {n} never failed"
                    await asyncio.sleep(0.05)
                if by:
                    resp = await http.post("/v1/sandbox/clock/advance", headers=hdrs(True), json={"by": by})
                    assert resp.status_code == 200, resp.text
            ep = await http.get(f"/v1/webhooks/endpoints/{endpoint_id}", headers=hdrs())
            assert ep.json()["status"] == "disabled"

            trig = await asyncio.to_thread(partner.run, *svc, "trigger", "booking.confirmed")
            assert trig.returncode == 0, trig.stderr
            said = trig.stdout.decode()
            assert (
                "(delivering to 0 endpoints; held for 1 disabled endpoint until enabled; on the stream)"
                in said
            )
            held_id = said.split(": ")[1].split()[0]
            resp = await http.get("/v1/webhooks/deliveries", params={"event": held_id}, headers=hdrs())
            assert [d["status"] for d in resp.json()["data"]] == ["held"]
        assert failing.count == 7  # nothing was sent for the held one
    finally:
        failing.stop()

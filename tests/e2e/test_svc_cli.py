"""``svc`` end to end, as a partner runs it: ``svc listen`` forwarding the sandbox's events to a real local
receiver, signed so that webhookd.verify (and ``svc verify``) accept them; the edge restarted mid-run while
events are published straight into webhookd, and every event still arriving exactly once; ``svc trigger``
for a sample event and for a forced failure."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest

from edge.testing import edge_args
from svcctl.client import create_demo_key
from tests.support import ROOT, ServiceProcess, event_data, free_port, sqlite_url, start_service
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc
from webhookd import verify
from webhookd.testing import Receiver


@dataclass
class Stack:
    tmp: pathlib.Path
    authsvc: ServiceProcess
    webhookd: ServiceProcess
    edge: ServiceProcess
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_edge(self) -> None:
        host = f"127.0.0.1:{self.port}"
        self.edge = ServiceProcess(
            "edge",
            edge_args(
                self.authsvc.grpc_target, self.webhookd.grpc_target, sqlite_url(self.tmp, "edge.db"), None,
                "--sandbox-listen", host, "--sandbox-hosts", host, "--sandbox-confirm-seconds", "0.1",
            ),
        ).start(self.tmp / "edge.log")  # fmt: skip


@pytest.fixture
def stack(tmp_path: pathlib.Path) -> Iterator[Stack]:
    procs: list[ServiceProcess] = []
    try:
        wh = start_service("webhookd", tmp_path, sqlite_url(tmp_path, "w.db"), "--poll-seconds", "0.1")
        procs.append(wh)
        auth = start_service("authsvc", tmp_path, sqlite_url(tmp_path, "a.db"))
        procs.append(auth)
        s = Stack(tmp_path, auth, wh, wh, free_port())
        s.start_edge()
        yield s
    finally:
        if "s" in locals():
            s.edge.terminate()
        for proc in reversed(procs):
            proc.terminate()


class Cli:
    """``python -m svccli ...`` with the key in SVC_API_KEY; stdout collected line by line by a thread."""

    def __init__(self, key: str, *args: str) -> None:
        env = {**os.environ, "SVC_API_KEY": key, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "svccli", *args],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.cursor = 0  # lines before it were matched by line_with already
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    async def line_with(self, text: str, within: float = 20) -> str:
        """The next line (after the last one matched) containing ``text``."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            while self.cursor < len(self.lines):
                line = self.lines[self.cursor]
                self.cursor += 1
                if text in line:
                    return line
            await asyncio.sleep(0.05)
        raise AssertionError(f"no line with {text!r}; got {self.lines}; exit code {self.proc.poll()}")

    def stop(self) -> tuple[str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        # Before reading stderr to its end: a CLI that never exits fails here, not at the suite's timeout.
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired as exc:  # kept as the cause: with what the test body raised, if any
            status = pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
            signals = [line for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt"))]
            mine = [line for line in pathlib.Path("/proc/self/status").read_text().splitlines()
                    if line.startswith(("SigBlk", "SigIgn"))]  # fmt: skip
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(
                f"svc listen did not exit within 15 s of SIGINT: {signals}; we: {mine}"
            ) from exc
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        self.reader.join(15)
        return "".join(self.lines), err


def run_cli(key: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "svccli", *args],
        cwd=ROOT, env={**os.environ, "SVC_API_KEY": key}, input=stdin, capture_output=True, timeout=60,
    )  # fmt: skip


async def publish_direct(webhookd: str, account_id: str, n: int, first: int = 0) -> list[str]:
    """Events published into webhookd while no edge runs (what an internal service does)."""
    ids = []
    async with grpc.aio.insecure_channel(webhookd) as channel:
        stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
        for i in range(first, first + n):
            data = event_data("booking.confirmed", booking=f"bk_test_direct{i:05d}")
            resp = await stub.PublishEvent(
                webhooks_pb2.PublishEventRequest(
                    account_id=account_id, environment=webhooks_pb2.ENVIRONMENT_SANDBOX,
                    type="booking.confirmed", state="confirmed", data=data,
                )
            )  # fmt: skip
            ids.append(resp.event.id)
    return ids


async def samples(stack: Stack, key: str, kinds: list[str]) -> list[str]:
    ids = []
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as http:
        for i, kind in enumerate(kinds):
            resp = await http.post(
                "/v1/sandbox/events",
                headers={"Authorization": f"Svc {key}", "Idempotency-Key": f"s-{time.time_ns()}-{i}"},
                json={"type": kind},
            )
            assert resp.status_code == 202, resp.text
            ids.append(resp.json()["event"]["id"])
    return ids


async def test_svc_listen_forwards_signed_events_exactly_once_across_an_edge_restart(stack: Stack) -> None:
    demo = await create_demo_key(stack.authsvc.grpc_target, None)
    account_id, key = demo["account_id"], demo["secret"]
    receiver = Receiver(None).start()
    listen = Cli(key, "--base-url", stack.base, "listen", "--forward-to", receiver.url("/webhooks"))
    try:
        secret = (await listen.line_with("signing secret is")).split("secret is ")[1].split()[0]
        assert secret.startswith("whsec_")
        await listen.line_with("Ready")

        # A drop before any event: what was published meanwhile is read back on reconnection.
        stack.edge.terminate()
        published = await publish_direct(stack.webhookd.grpc_target, account_id, 2)
        await listen.line_with("reconnecting")
        stack.start_edge()
        await listen.line_with("Ready")
        await receiver.wait_for(2, 30)

        published += await samples(
            stack, key, ["booking.confirmed", "esim.provisioned", "ledger.low_balance"]
        )
        cli = await asyncio.to_thread(run_cli, key, "--base-url", stack.base, "trigger", "booking.cancelled")
        assert cli.returncode == 0, cli.stderr
        published.append(cli.stdout.decode().split(": ")[1].split()[0])
        cli = await asyncio.to_thread(
            run_cli, key, "--base-url", stack.base, "trigger", "--failure", "booking_failed"
        )
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert b"HTTP 202" in cli.stdout
        await receiver.wait_for(len(published) + 1, 30)  # + the booking.failed the trigger led to

        stack.edge.terminate()
        published += await publish_direct(stack.webhookd.grpc_target, account_id, 3, first=2)
        await listen.line_with("reconnecting")
        stack.start_edge()
        await listen.line_with("resuming after")
        # The demo account is mode A: payment.* would be refused (svckit.events.mode_refusal).
        published += await samples(stack, key, ["settlement.invoice_issued", "apikey.revoked"])

        await receiver.wait_for(len(published) + 1, 30)
        await asyncio.sleep(0.5)  # a duplicate would arrive by now
        got = receiver.received()
        bodies = [json.loads(r.body) for r in got]
        ids = [b["id"] for b in bodies]
        assert len(ids) == len(set(ids)) == len(published) + 1
        assert set(published) <= set(ids)
        assert [b["type"] for b in bodies if b["id"] not in published] == ["booking.failed"]
        for r in got:
            verify(r.body, r.headers["x-service-signature"], [secret], time.time())
            assert r.headers["x-service-event-id"] == json.loads(r.body)["id"]
            assert r.headers["user-agent"].startswith("Svc-Webhooks/")

        check = await asyncio.to_thread(
            run_cli, "", "verify", "--secret", secret, "--header", got[0].headers["x-service-signature"],
            stdin=got[0].body,
        )  # fmt: skip
        assert check.returncode == 0 and b"signature valid" in check.stdout
        tampered = await asyncio.to_thread(
            run_cli, "", "verify", "--secret", secret, "--header", got[0].headers["x-service-signature"],
            stdin=got[0].body.replace(b"}", b" }", 1),
        )  # fmt: skip
        assert tampered.returncode == 1 and b"signature invalid" in tampered.stdout
    finally:
        out, err = listen.stop()
        receiver.stop()
    for event_id in published:
        assert sum(event_id in line and "[200]" in line for line in out.splitlines()) == 1, out + err
    assert key not in out + err
    assert key not in stack.edge.logs()

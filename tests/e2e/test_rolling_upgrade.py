"""The rolling upgrade of webhookd as docs/operations.md "Upgrades and rollbacks" describes it, under traffic:
processes of the previous release (the last one before revision 0009, which moved the queue into a table of
its own) serve; the new release's ``migrate`` runs beside them; a new process starts; the old one stops. At
every step events are published to old and new processes alike and delivered to a slow receiver. Nothing
is lost, and the only events sent twice are ones an old process was sending when the migration took its
delivery into the new queue: its result could no longer be written, so the new release sent it again once
that lease ran out (at least once, as after a crash). The old release runs from its own commit of this
repository's history, with its own generated stubs."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import io
import os
import pathlib
import ssl
import subprocess
import sys
import tarfile

import grpc
import pytest

from svckit import catalog
from svckit.migrations import head
from svckit.protos import struct
from tests.support import ROOT, ServiceProcess
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd.migrations import SCHEMA
from webhookd.testing import Receiver

# The last commit before revision 0009: the release a deployment at revision 0008 runs.
PREVIOUS_RELEASE = "fee7ed05c023c08fad78d78cd875043bb182b1f5"
LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_upgrade"
LEASE = 5.0
KIND = "booking.confirmed"


def _previous_release(into: pathlib.Path) -> pathlib.Path:
    """The previous release's code (``git archive`` of its commit) with its gRPC stubs generated."""
    try:
        archive = subprocess.run(
            ["git", "archive", PREVIOUS_RELEASE, "svckit", "webhookd", "proto", "scripts/gen_protos.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"the previous release's commit is not in this clone's history: {exc.stderr[:200]!r}")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    bindir = str(pathlib.Path(sys.executable).parent)  # protoc's mypy plugins
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run(
        [sys.executable, "scripts/gen_protos.py"], cwd=into, env=env, check=True, capture_output=True
    )
    return into


def _webhookd(db_url: str, ca: str, release: pathlib.Path | None = None) -> ServiceProcess:
    args = [
        "--listen", "127.0.0.1:0",
        "--metrics-listen", "",
        "--database", db_url,
        "--allow-private-targets",
        "--ca-bundle", ca,
        "--delivery-timeout", "3",
        "--lease-seconds", str(LEASE),
        "--concurrency", "8",
        "--poll-seconds", "0.05",
    ]  # fmt: skip
    if release is None:
        return ServiceProcess("webhookd", args)
    return ServiceProcess("webhookd", args, env={"PYTHONPATH": str(release)}, cwd=release)


class Publisher:
    """Publishes events one after another, each to the next of the running processes in turn."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self.accepted: list[str] = []
        self.failures = 0
        self.stopped = False

    async def run(self) -> None:
        state, data = catalog.sample(KIND, "A", dt.datetime.now(dt.UTC))
        i = 0
        while not self.stopped:
            target = self.targets[i % len(self.targets)]
            async with grpc.aio.insecure_channel(target) as channel:
                stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
                try:
                    resp = await stub.PublishEvent(
                        pb.PublishEventRequest(
                            account_id=ACCT,
                            environment=LIVE,
                            type=KIND,
                            state=state,
                            data=struct(data),
                            idempotency_key=f"up-{i}",
                        ),
                        timeout=5,
                    )
                    self.accepted.append(resp.event.id)
                except grpc.aio.AioRpcError:
                    self.failures += 1
            i += 1
            await asyncio.sleep(0.01)

    async def until(self, count: int) -> None:
        while len(self.accepted) < count:  # noqa: ASYNC110 (the publisher is another task of this loop)
            await asyncio.sleep(0.02)


async def _run(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhookd", *args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()[-2000:]
    return out.decode()


@pytest.mark.postgres
async def test_rolling_upgrade_across_revision_0009_loses_nothing_and_sends_twice_only_after_a_lease(
    pg_url: str, tls: tuple[ssl.SSLContext, str], receiver: Receiver, tmp_path: pathlib.Path
) -> None:
    release = _previous_release(tmp_path / "previous")
    receiver.delay = 0.2  # slow: deliveries are in flight when the migration runs
    old = _webhookd(pg_url, tls[1], release).start(tmp_path / "old.log")
    new: ServiceProcess | None = None
    publisher = Publisher()
    try:
        async with grpc.aio.insecure_channel(old.grpc_target) as channel:
            stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
            for _ in range(2):
                await stub.RegisterEndpoint(
                    pb.RegisterEndpointRequest(
                        account_id=ACCT, environment=LIVE, url=receiver.url(), events=[KIND]
                    )
                )
        publisher.targets = [old.grpc_target]
        task = asyncio.create_task(publisher.run())
        await publisher.until(60)
        # 1. The new release's migrate, while the old process serves and sends.
        assert f"schema at revision {head(SCHEMA)}" in await _run("migrate", "--database", pg_url)
        migrated_at = receiver.count
        # 2. A new process beside the old one; both take publishes.
        new = _webhookd(pg_url, tls[1]).start(tmp_path / "new.log")
        publisher.targets = [old.grpc_target, new.grpc_target]
        await publisher.until(len(publisher.accepted) + 80)
        # 3. The old process stops (as a roll replaces it); the new one goes on alone.
        publisher.targets = [new.grpc_target]
        await asyncio.sleep(0.1)
        assert old.terminate() == 0, old.logs()[-2000:]
        await publisher.until(len(publisher.accepted) + 40)
        publisher.stopped = True
        await task
        assert publisher.failures == 0
        accepted = set(publisher.accepted)
        # Everything arrives, at each of the two endpoints: what the old process queued and never sent is
        # adopted by the new one (its housekeeping, every 5 s).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while True:
            counts = collections.Counter(r.headers["x-service-event-id"] for r in receiver.received())
            if all(counts[e] >= 2 for e in accepted) or loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
        missing = [e for e in accepted if counts[e] < 2]
        assert not missing, f"{len(missing)} of {len(accepted)} events did not reach both endpoints"
        await asyncio.sleep(LEASE + 1)  # a second send would come after a lease
        order = [r.headers["x-service-event-id"] for r in receiver.received()]
        counts = collections.Counter(order)
        assert set(counts) == accepted
        twice = {e for e, c in counts.items() if c > 2}  # two endpoints: each event twice exactly
        # Sent again only if it was already on its way when the migration ran.
        first_arrival = {e: i for i, e in reversed(list(enumerate(order)))}
        late = [e for e in twice if first_arrival[e] >= migrated_at + 16]  # 8 sends x 2 in flight
        assert not late, f"{len(late)} events sent again that were not in flight at the migration"
        assert len(twice) <= 16, twice
    finally:
        publisher.stopped = True
        old.kill()
        if new is not None:
            new.kill()

"""The delivery worker under measure: the bench's rows preloaded straight into the tables, the repository
that counts committed results, a sender without network, and ``run_phase``, one run of the worker until a
set of due deliveries is committed."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import pathlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from svckit.clock import SystemClock
from svckit.ids import new_id, sortable_id
from svckit.signing import new_secret, sign
from svckit.webhook_status import EndpointStatus
from webhookd._admission import NO_SKIPS
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._events import Environment, build_envelope
from webhookd._repository import EndpointRecord, SigningSecret
from webhookd._retry import Outcome
from webhookd._sender import Sender, SendResult
from webhookd._server import Config, make_client, make_transport
from webhookd._sql import SqlRepository, deliveries, events
from webhookd._ssrf import Policy
from webhookd._tables import pending
from webhookd._times import us

ACCT, ENV = "acct_bench", "live"
HOSTILE_ACCT = "acct_hostile"


def envelope(event_id: str, now: dt.datetime) -> bytes:
    """A typical booking.confirmed event body (about 300 bytes)."""
    return build_envelope(
        event_id=event_id, kind="booking.confirmed", created=now, environment=Environment.LIVE,
        account_id=ACCT, state="confirmed", data={"booking_id": new_id("bk"), "amount": 12345},
    )  # fmt: skip


def config_for(ca_path: str, worker: WorkerConfig | None = None) -> Config:
    """The worker's config for the bench: loopback targets allowed, the receiver's CA trusted."""
    config = Config(policy=Policy(allow_private=True), worker=worker or WorkerConfig())
    config.ca_bundle = ca_path
    return config


async def preload(
    repo: SqlRepository, endpoint_id: str | Sequence[str], due: list[dt.datetime], account: str = ACCT
) -> None:
    """Events and their deliveries, due at ``due``; several endpoints take them in turn."""
    now = dt.datetime.now(dt.UTC)
    ev_rows, del_rows = [], []
    targets = [endpoint_id] if isinstance(endpoint_id, str) else list(endpoint_id)
    for i, when in enumerate(due):
        endpoint_id = targets[i % len(targets)]
        eid = sortable_id("evt", now)
        body = envelope(eid, now)
        ev_rows.append(
            {
                "id": eid,
                "account_id": account,
                "environment": ENV,
                "type": "booking.confirmed",
                "state": "confirmed",
                "created_at": us(now),
                "envelope": body,
                "idempotency_key": None,
            }
        )
        del_rows.append({"id": sortable_id("msg", now), "event_id": eid, "endpoint_id": endpoint_id,
                         "account_id": account, "environment": ENV, "event_type": "booking.confirmed",
                         "status": "pending", "attempt_count": 0, "schedule_count": 0, "due_at": us(when),
                         "next_attempt_at": None, "lease_owner": None, "created_at": us(now),
                         "updated_at": us(now)})  # fmt: skip
    # As ``webhookd._rows.delivery_row`` and ``pending_row`` write them: the queue row holds when it is due;
    # the delivery's own next_attempt_at is NULL (set, it would be a row an older release queued: in the
    # partial index wh_deliveries_old_queue, so recording its result could never be a HOT update).
    queue_rows = [
        {"id": d["id"], "endpoint_id": d["endpoint_id"], "account_id": account, "environment": ENV,
         "attempt_count": 0, "next_attempt_at": d["due_at"], "lease_owner": None, "ordering_key": None,
         "event_seq": None}
        for d in del_rows
    ]  # fmt: skip
    async with repo.engine.begin() as conn:
        for i in range(0, len(ev_rows), 5000):
            await conn.execute(events.insert(), ev_rows[i : i + 5000])
            await conn.execute(deliveries.insert(), del_rows[i : i + 5000])
            await conn.execute(pending.insert(), queue_rows[i : i + 5000])


def endpoint(port: int, url: str = "", account: str = ACCT) -> EndpointRecord:
    """The one endpoint every delivery goes to: the receiver on ``port`` (or ``url``)."""
    now = dt.datetime.now(dt.UTC)
    return EndpointRecord(
        id=new_id("we"), account_id=account, environment=ENV, url=url or f"https://127.0.0.1:{port}/hook",
        events=["booking.confirmed"], description="bench", status=EndpointStatus.ENABLED, disabled_reason="",
        created_at=now, updated_at=now, secrets=[SigningSecret(new_secret())],
    )  # fmt: skip


class CountingRepo(SqlRepository):
    """Counts deliveries whose result is committed (only the attempts to endpoint ``only`` when it is set)."""

    committed = 0
    target = 0
    done: asyncio.Event
    only: str | None = None

    async def record_and_claim(self, outcomes, owner, now, limit, lease_until, skips=NO_SKIPS):  # type: ignore[no-untyped-def]
        out = await super().record_and_claim(outcomes, owner, now, limit, lease_until, skips)
        only = self.only
        CountingRepo.committed += (
            len(outcomes)
            if only is None
            else sum(1 for o in outcomes if o.endpoint_id == only and o.attempt is not None)
        )
        if CountingRepo.committed >= self.target:
            self.done.set()
        return out


class NullSender:
    """Signs and answers 200 without any network: isolates claim + sign + group commit."""

    async def send(
        self,
        url: str,
        body: bytes,
        secrets: list[str],
        event_id: str,
        now: dt.datetime,
        *_scheme: object,
        **_auth: object,
    ) -> SendResult:
        header = sign(secrets, body, now)
        await asyncio.sleep(0)
        return SendResult(Outcome.SUCCEEDED, 200, "ok", {"X-Service-Signature": header}, 0.0, "")


async def run_phase(
    db: str,
    port: int,
    ca_path: str,
    due: list[dt.datetime],
    cfg: WorkerConfig,
    limit_s: float,
    network: bool = True,
    hostile: Sequence[str] = (),
    per_hostile: int = 0,
) -> tuple[float, list[float], int, float, float, dict[str, float]]:
    """``hostile``: URLs of another account's endpoints, each with ``per_hostile`` deliveries due over the
    span of ``due``; then only the healthy endpoint's deliveries are counted and its lags kept."""
    steady = due[0] > dt.datetime.now(dt.UTC)  # the lag phase: deliveries come due from a start ahead
    repo = await CountingRepo.open(db)
    assert isinstance(repo, CountingRepo)
    ep = endpoint(port)
    await repo.create_endpoint(ep)
    heps = [endpoint(port, url, HOSTILE_ACCT) for url in hostile]
    for hep in heps:
        await repo.create_endpoint(hep)
    late = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1) - due[0]
    if steady and late > dt.timedelta(0):  # creating the endpoints ate the head start: keep one second
        due = [d + late for d in due]
    await preload(repo, ep.id, due)
    span = due[-1] - due[0]
    for hep in heps:
        spread = [due[0] + span * k / per_hostile for k in range(per_hostile)]
        await preload(repo, hep.id, spread, HOSTILE_ACCT)
    repo.only = ep.id if hostile else None
    CountingRepo.committed = 0
    repo.target = len(due)
    repo.done = asyncio.Event()
    config = config_for(ca_path, cfg)
    transport = make_transport(config)
    client = make_client(config, transport)
    lags: list[float] = []
    sender: Any = Sender(client, direct=transport) if network else NullSender()

    def on_sent(claim: Any, lag: float) -> None:
        if claim.delivery.endpoint_id == ep.id:
            lags.append(lag)

    worker = DeliveryWorker(repo, sender, SystemClock(), cfg, on_sent=on_sent)
    start = time.perf_counter()
    cpu_start, loop_start = time.process_time(), time.thread_time()
    threads_start = thread_cpu()
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(repo.done.wait(), limit_s)
    except TimeoutError:
        print(f"  (stopped after {limit_s:.0f} s with {CountingRepo.committed}/{len(due)} committed)")
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    loop_busy = (time.thread_time() - loop_start) / elapsed
    committed = CountingRepo.committed
    by_thread = {k: v - threads_start.get(k, 0.0) for k, v in thread_cpu().items()}
    await worker.stop(1.0)
    await task
    await client.aclose()
    await repo.close()
    return elapsed, lags, committed, cpu, loop_busy, by_thread


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each thread of this process, by thread name (Linux /proc)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    for task in pathlib.Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = "event loop" if task.name == str(os.getpid()) else names.get(task.name, "other")
        name = name.rstrip("_0123456789").removesuffix(" (_connection_worker_thread)")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out

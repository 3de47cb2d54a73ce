"""Claims and group commits at the storage port, on both queues (SQLite: one connection in its own thread;
PostgreSQL: one asyncpg connection): leases, ordering, the lease-owner guard on results, attempt rows."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses as dc
import datetime as dt
import random
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from svckit.clock import FakeClock
from svckit.migrations import downgrade
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd import _queue_sql as q
from webhookd._admission import Skips
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._pg_queue import PostgresQueue
from webhookd._repository import (
    AttemptRecord,
    DeliveryFilter,
    EndpointRecord,
    EventRecord,
    SigningSecret,
)
from webhookd._repository import DeliveryResult as Stored
from webhookd._sender import Sender
from webhookd._sql import SqlRepository
from webhookd._sqlite_queue import SqliteQueue
from webhookd._tables import deliveries, events, pending
from webhookd._times import us
from webhookd.migrations import SCHEMA

T0 = dt.datetime(2026, 5, 1, 9, 0, 0, 654321, tzinfo=dt.UTC)
ACCT = "acct_claims"
MINUTE = dt.timedelta(minutes=1)


async def _setup(repo: SqlRepository, n: int) -> EndpointRecord:
    ep = EndpointRecord("we_claims", ACCT, "live", "https://hooks.partner.test/h", ["booking.confirmed"], "",
                        EndpointStatus.ENABLED, "", T0, T0, [SigningSecret("whsec_" + "C" * 44)])  # fmt: skip
    await repo.create_endpoint(ep)
    for i in range(n):
        event = EventRecord(f"evt_{i:03d}", ACCT, "live", "booking.confirmed", "confirmed", T0,
                            b'{"id":"evt_%03d"}' % i)  # fmt: skip
        await repo.publish(event, "", T0 + dt.timedelta(seconds=i))
    return ep


def _attempt(delivery_id: str, event_id: str, at: dt.datetime) -> AttemptRecord:
    return AttemptRecord(f"att_{delivery_id}", delivery_id, "we_claims", event_id, ACCT, "live", 1,
                         "succeeded", 200, "ok", {"X-Service-Event-Id": event_id}, 1.5, "", at)  # fmt: skip


async def test_claims_lease_and_results_need_the_lease(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        # The store is picked once, from the URL, and the worker's cycles go through it.
        assert isinstance(repo.queue, SqliteQueue if db_url.startswith("sqlite") else PostgresQueue)
        await _setup(repo, 5)
        now = T0 + dt.timedelta(minutes=1)
        lease = now + dt.timedelta(seconds=60)
        claims = await repo.claim_due(now, 3, lease, "wrk_a")
        assert [c.delivery.event_id for c in claims] == ["evt_000", "evt_001", "evt_002"]
        assert all(c.endpoint is not None and c.endpoint.valid_secrets(now) for c in claims)
        assert claims[0].envelope == b'{"id":"evt_000"}'
        assert claims[0].delivery.next_attempt_at == T0  # the due time, not the lease
        rest = await repo.claim_due(now, 10, lease, "wrk_b")
        assert [c.delivery.event_id for c in rest] == [
            "evt_003",
            "evt_004",
        ]  # leased rows are not claimed twice
        assert await repo.claim_due(now, 10, lease, "wrk_b") == []

        # Results count only for the lease holder: wrk_b cannot finish wrk_a's deliveries.
        mine, theirs = claims[0].delivery, claims[1].delivery
        outcomes = [
            Stored(
                mine.id,
                "we_claims",
                _attempt(mine.id, mine.event_id, now),
                DeliveryStatus.SUCCEEDED,
                None,
                True,
            ),
            Stored(theirs.id, "we_claims", None, DeliveryStatus.SUCCEEDED, None, True),
        ]
        assert await repo.record_outcomes(outcomes[:1], "wrk_a", now) == []
        await repo.record_outcomes(outcomes[1:], "wrk_b", now)
        done = await repo.get_delivery(mine.id)
        other = await repo.get_delivery(theirs.id)
        assert done is not None and done.status == DeliveryStatus.SUCCEEDED and done.attempt_count == 1
        assert other is not None and other.status == DeliveryStatus.PENDING and other.attempt_count == 0
        attempts = await repo.list_attempts(DeliveryFilter(ACCT, "live", delivery_id=mine.id), "", 10, None)
        assert [(a.id, a.attempted_at, a.request_headers) for a in attempts] == [
            (f"att_{mine.id}", now, {"X-Service-Event-Id": "evt_000"})
        ]
        # When the lease runs out, what was not finished is due again.
        later = await repo.claim_due(lease, 10, lease + dt.timedelta(seconds=60), "wrk_c")
        assert sorted(c.delivery.event_id for c in later) == ["evt_001", "evt_002", "evt_003", "evt_004"]
    finally:
        await repo.close()
    # Closing stops the SQLite queue's threads (the writer and the WAL checkpointer).
    assert not [t for t in threading.enumerate() if t.name.startswith("webhookd-sqlite")]


async def test_one_cycle_writes_results_then_claims_in_big_batches(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 300)
        now = T0 + dt.timedelta(minutes=10)
        lease = now + dt.timedelta(seconds=60)
        first = await repo.claim_due(now, 290, lease, "wrk_a")  # 256 + 32 + 2: several statement sizes
        outcomes = [
            Stored(d.id, "we_claims", _attempt(d.id, d.event_id, now), DeliveryStatus.SUCCEEDED, None, True)
            for d in (c.delivery for c in first)
        ]
        alerts, rest = await repo.record_and_claim(outcomes, "wrk_a", now, 50, lease)
        assert alerts == []
        assert [c.delivery.event_id for c in rest] == [f"evt_{i:03d}" for i in range(290, 300)]
        flt = DeliveryFilter(ACCT, "live")
        done = await repo.list_deliveries(
            DeliveryFilter(ACCT, "live", status=DeliveryStatus.SUCCEEDED), 500, None
        )
        assert sorted(d.id for d in done) == sorted(c.delivery.id for c in first)
        assert all(d.attempt_count == 1 and d.next_attempt_at is None for d in done)
        assert len(await repo.list_attempts(flt, "", 500, None)) == 290
        # Nothing to write and nothing due: an empty cycle changes nothing.
        assert await repo.record_and_claim([], "wrk_a", now, 50, lease) == ([], [])
    finally:
        await repo.close()


async def test_a_cycle_frees_the_keys_it_finishes_and_never_claims_what_it_records(db_url: str) -> None:
    # A cycle's claim sees the results it wrote: a key's head finished in the cycle holds its key back no
    # longer, and a row recorded after its lease ran out (due again by the lease) is not claimed again.
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 4)
        async with repo.engine.begin() as conn:
            for i, key in enumerate(["bk_1", "bk_1", "bk_2", "bk_2"]):
                await conn.execute(
                    deliveries.update()
                    .where(deliveries.c.event_id == f"evt_{i:03d}")
                    .values(ordering_key=key, event_seq=i)
                )
                ids = sa.select(deliveries.c.id).where(deliveries.c.event_id == f"evt_{i:03d}")
                await conn.execute(
                    pending.update().where(pending.c.id.in_(ids)).values(ordering_key=key, event_seq=i)
                )
        now = T0 + MINUTE
        heads = await repo.claim_due(now, 10, now + dt.timedelta(seconds=1), "wrk_a")
        assert [c.delivery.event_id for c in heads] == ["evt_000", "evt_002"]
        later = now + dt.timedelta(seconds=2)  # the leases ran out: the heads are due again
        done = [
            Stored(d.id, "we_claims", _attempt(d.id, d.event_id, later), DeliveryStatus.SUCCEEDED, None, True)
            for d in (c.delivery for c in heads)
        ]
        alerts, claims = await repo.record_and_claim(done, "wrk_a", later, 10, later + MINUTE)
        assert alerts == []
        assert [c.delivery.event_id for c in claims] == ["evt_001", "evt_003"]
        flt = DeliveryFilter(ACCT, "live", status=DeliveryStatus.SUCCEEDED)
        succeeded = await repo.list_deliveries(flt, 10, None)
        assert sorted((d.event_id, d.attempt_count) for d in succeeded) == [("evt_000", 1), ("evt_002", 1)]
    finally:
        await repo.close()


@contextlib.asynccontextmanager
async def _worker(
    db_url: str,
    deliveries: int,
    answer: Callable[[httpx.Request], Coroutine[Any, Any, httpx.Response]],
    **cfg: Any,
) -> AsyncIterator[tuple[SqlRepository, DeliveryWorker, dt.datetime]]:
    """A pipelined worker on a frozen clock over ``deliveries`` due deliveries, answered by ``answer``."""
    repo = await SqlRepository.open(db_url)
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    try:
        await _setup(repo, deliveries)
        now = T0 + dt.timedelta(minutes=10)
        yield (
            repo,
            DeliveryWorker(repo.queue, Sender(client), FakeClock(now), WorkerConfig(**cfg), owner="wrk_p"),
            now,
        )
    finally:
        await client.aclose()
        await repo.close()


async def test_graceful_stop_hands_back_claims_that_never_started(db_url: str) -> None:
    release = asyncio.Event()

    async def hang(_request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200)

    # One account with the whole pool of two (by default it holds half, its new endpoint half of that).
    whole = {"account_share": 1.0, "probation_share": 1.0}
    async with _worker(db_url, 6, hang, batch_size=10, concurrency=2, **whole) as (repo, worker, now):
        task = asyncio.create_task(worker.run())
        for _ in range(200):  # two sends hang; two more claims wait (ready, or deferred at the account's cap)
            await asyncio.sleep(0.01)
            if worker._sending == 2 and len(worker._waiting()) == 2:
                break
        assert (worker._sending, len(worker._waiting())) == (2, 2)
        await worker.stop(grace=0.05)
        await task
        release.set()
        # The two that never started, and the two cut off mid-send (handed back rather than left to their
        # lease: another process sends them now, at least once), are due again at once as they were, with
        # no attempt counted; two were never claimed.
        again = await repo.claim_due(now, 10, now + dt.timedelta(seconds=60), "wrk_t")
        assert sorted(c.delivery.event_id for c in again) == [f"evt_00{i}" for i in range(6)]
        assert all(c.delivery.attempt_count == 0 and c.delivery.next_attempt_at is not None for c in again)
        assert [c.delivery.next_attempt_at for c in again[:2]] == [T0, T0 + dt.timedelta(seconds=1)]


async def test_pipelined_worker_commits_every_result_of_a_burst(db_url: str) -> None:
    """Results finish while storage cycles run; every one must reach a commit (a frozen clock means a
    lost result would leave its delivery leased forever instead of being retried after the lease)."""

    async def answer(_request: httpx.Request) -> httpx.Response:
        for _ in range(random.randint(0, 3)):
            await asyncio.sleep(0)
        return httpx.Response(200, text="ok")

    async with _worker(db_url, 400, answer, batch_size=50, concurrency=16) as (repo, worker, _now):
        task = asyncio.create_task(worker.run())
        done: list[Any] = []
        for _ in range(1000):
            await asyncio.sleep(0.02)
            done = await repo.list_deliveries(
                DeliveryFilter(ACCT, "live", status=DeliveryStatus.SUCCEEDED), 500, None
            )
            if len(done) == 400:
                break
        await worker.stop(grace=1)
        await task
        assert len(done) == 400
        assert len(await repo.list_attempts(DeliveryFilter(ACCT, "live"), "", 500, None)) == 400


async def test_signing_secrets_are_sealed_at_rest_and_open_for_claims(db_url: str) -> None:
    from webhookd._errors import SecretsKeyError
    from webhookd._secretbox import SecretBox, new_key, parse_key
    from webhookd._sql import endpoints

    plain = await SqlRepository.open(db_url)
    try:
        await _setup(plain, 2)  # written before a key was configured: stored in the clear
    finally:
        await plain.close()
    key = parse_key(new_key())
    repo = await SqlRepository.open(db_url, SecretBox(key))
    try:
        assert await repo.seal_secrets() == 1
        assert await repo.seal_secrets() == 0
        async with repo.engine.connect() as conn:
            stored = (await conn.execute(endpoints.select())).all()
        assert [r.secrets[:5] for r in stored] == ["enc2:"]  # sealed naming its key
        assert "whsec_" not in stored[0].secrets
        ep = await repo.get_endpoint(ACCT, "live", "we_claims")
        assert ep is not None and ep.secrets[0].secret == "whsec_" + "C" * 44
        # The worker's claim path (the SQLite queue on a file) opens them too.
        now = T0 + dt.timedelta(minutes=1)
        claims = await repo.claim_due(now, 5, now + dt.timedelta(seconds=60), "wrk_k")
        assert [c.endpoint.valid_secrets(now) if c.endpoint else None for c in claims] == [
            ["whsec_" + "C" * 44]
        ] * 2
    finally:
        await repo.close()
    for box in (SecretBox(), SecretBox(parse_key(new_key()))):  # no key, or another key: refuse at start
        other = await SqlRepository.open(db_url, box)
        try:
            with pytest.raises(SecretsKeyError):
                await other.seal_secrets()
        finally:
            await other.close()


async def test_attempts_keep_response_headers_and_an_older_database_is_migrated(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 2)
        now = T0 + dt.timedelta(minutes=1)
        first, second = (
            c.delivery for c in await repo.claim_due(now, 2, now + dt.timedelta(seconds=60), "wrk_a")
        )
        kept = _attempt(first.id, first.event_id, now)
        kept.response_headers = {"content-type": "text/plain", "x-receipt": "r-1"}
        await repo.record_outcomes(
            [Stored(first.id, "we_claims", kept, DeliveryStatus.SUCCEEDED, None, True)], "wrk_a", now
        )
        got = await repo.get_attempt(ACCT, "live", kept.id)
        assert got is not None and got.response_headers == kept.response_headers
        # Make it a database from before revision 0003: no column, at 0002, an attempt row kept.
        assert await downgrade(repo.engine, SCHEMA, "0002") == "0002"
    finally:
        await repo.close()
    repo = await SqlRepository.open(db_url)
    try:
        old = await repo.get_attempt(ACCT, "live", kept.id)
        assert old is not None and old.response_headers == {} and old.response_body == "ok"
        new = _attempt(second.id, second.event_id, now)
        new.response_headers = {"x-receipt": "r-2"}
        await repo.record_outcomes(
            [Stored(second.id, "we_claims", new, DeliveryStatus.SUCCEEDED, None, True)], "wrk_a", now
        )
        got = await repo.get_attempt(ACCT, "live", new.id)
        assert got is not None and got.response_headers == {"x-receipt": "r-2"}
    finally:
        await repo.close()


async def test_last_failure_disables_alerts_and_holds_the_rest_in_the_same_cycle(db_url: str) -> None:
    """DISABLE_ENDPOINT, INSERT_ALERT and HOLD on both stores: a delivery whose last attempt failed
    disables its endpoint and writes one alert; the endpoint's other waiting deliveries become held,
    while one still leased to another worker is left to its result."""
    repo = await SqlRepository.open(db_url)
    try:
        ep = await _setup(repo, 4)
        now = T0 + dt.timedelta(minutes=1)
        lease = now + dt.timedelta(seconds=60)
        [last] = await repo.claim_due(now, 1, lease, "wrk_a")
        [other] = await repo.claim_due(now, 1, lease, "wrk_b")
        failed = dc.replace(_attempt(last.delivery.id, last.delivery.event_id, now), outcome="http_error")
        outcome = Stored(last.delivery.id, ep.id, failed, DeliveryStatus.FAILED, None, True,
                         disable_endpoint=True, disabled_reason="the last of 7 attempts failed")  # fmt: skip
        alerts, claims = await repo.record_and_claim([outcome], "wrk_a", now, 10, lease)
        assert claims == []  # the rest is held, nothing left to claim
        assert [(a.endpoint_id, a.reason) for a in alerts] == [(ep.id, "the last of 7 attempts failed")]
        assert [a.id for a in await repo.pending_alerts(10)] == [alerts[0].id]
        got = await repo.get_endpoint(ACCT, "live", ep.id)
        assert got is not None and got.status is EndpointStatus.DISABLED
        by_status = {
            s: sorted(
                d.id for d in await repo.list_deliveries(DeliveryFilter(ACCT, "live", status=s), 10, None)
            )
            for s in DeliveryStatus
        }
        assert by_status[DeliveryStatus.FAILED] == [last.delivery.id]
        assert by_status[DeliveryStatus.PENDING] == [other.delivery.id]  # still leased to wrk_b
        assert len(by_status[DeliveryStatus.HELD]) == 2
        # A second failure of the same endpoint neither disables again nor alerts twice.
        again = Stored(other.delivery.id, ep.id, None, DeliveryStatus.FAILED, None, False,
                       disable_endpoint=True, disabled_reason="again")  # fmt: skip
        assert await repo.record_outcomes([again], "wrk_b", now) == []
    finally:
        await repo.close()


async def test_saving_a_disabled_endpoint_holds_its_waiting_deliveries(db_url: str) -> None:
    """HOLD through the repository's own transaction (SQLAlchemy's driver connection) on both stores."""
    repo = await SqlRepository.open(db_url)
    try:
        ep = await _setup(repo, 3)
        now = T0 + dt.timedelta(minutes=1)
        [leased] = await repo.claim_due(now, 1, now + dt.timedelta(seconds=60), "wrk_a")
        ep.status, ep.updated_at = EndpointStatus.DISABLED, now
        assert await repo.save_endpoint(ep)
        held = await repo.list_deliveries(DeliveryFilter(ACCT, "live", status=DeliveryStatus.HELD), 10, None)
        assert len(held) == 2 and leased.delivery.id not in {d.id for d in held}
        assert all(d.updated_at == now for d in held)
    finally:
        await repo.close()


async def test_purge_deletes_only_attempts_before_the_cutoff(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 2)
        now = T0 + dt.timedelta(minutes=1)
        claims = await repo.claim_due(now, 2, now + dt.timedelta(seconds=60), "wrk_a")
        outcomes = [
            Stored(
                c.delivery.id,
                "we_claims",
                _attempt(c.delivery.id, c.delivery.event_id, now + i * MINUTE),
                DeliveryStatus.SUCCEEDED,
                None,
                True,
            )
            for i, c in enumerate(claims)
        ]
        await repo.record_outcomes(outcomes, "wrk_a", now)
        assert await repo.purge_attempts(now + MINUTE) == 1
        left = await repo.list_attempts(DeliveryFilter(ACCT, "live"), "", 10, None)
        assert [a.delivery_id for a in left] == [claims[1].delivery.id]
    finally:
        await repo.close()


async def test_a_recovered_delivery_whose_claimer_died_is_claimed_again(db_url: str) -> None:
    """A failed delivery recovered by hand, claimed, then its process killed: releasing the dead
    process's leases (SQLite, at start) must make it due again, not leave it with no due time."""
    repo = await SqlRepository.open(db_url)
    try:
        ep = await _setup(repo, 1)
        now = T0 + dt.timedelta(minutes=1)
        lease = now + dt.timedelta(seconds=60)
        [last] = await repo.claim_due(now, 1, lease, "wrk_a")
        failed = dc.replace(_attempt(last.delivery.id, last.delivery.event_id, now), outcome="http_error")
        outcome = Stored(last.delivery.id, ep.id, failed, DeliveryStatus.FAILED, None, True,
                         disable_endpoint=True, disabled_reason="the last of 7 attempts failed")  # fmt: skip
        await repo.record_outcomes([outcome], "wrk_a", now)
        got = await repo.get_endpoint(ACCT, "live", ep.id)
        assert got is not None
        got.status, got.updated_at = EndpointStatus.ENABLED, now
        assert await repo.save_endpoint(got)
        assert await repo.recover(got, None, now) == 1
        [again] = await repo.claim_due(now, 1, lease, "wrk_dead")
        assert again.delivery.id == last.delivery.id
        assert again.delivery.next_attempt_at == now  # the due time, not the lease
        # SQLite (one process) hands a dead predecessor's leases back at start; PostgreSQL lets them run out.
        single = db_url.startswith("sqlite")
        assert await repo.release_leases(now) == (1 if single else 0)
        when = now if single else lease
        [after] = await repo.claim_due(when, 1, when + dt.timedelta(seconds=60), "wrk_new")
        assert after.delivery.id == last.delivery.id
    finally:
        await repo.close()


async def test_next_due_after_is_the_next_delivery_to_come_due(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 3)  # due at T0, T0 + 1 s, T0 + 2 s
        second = dt.timedelta(seconds=1)
        assert await repo.next_due_after(T0) == T0 + second
        assert await repo.next_due_after(T0 + 2 * second) is None
        await repo.claim_due(T0 + 2 * second, 10, T0 + MINUTE, "wrk_a")  # all leased until T0 + 1 min
        assert await repo.next_due_after(T0 + 2 * second) == T0 + MINUTE
    finally:
        await repo.close()


async def _statements_sent(repo: SqlRepository) -> list[str]:
    """The first word of each statement the PostgreSQL queue's connections (its writes', its reads') send
    from now on (asyncpg calls its query loggers soon after a statement, not at once)."""
    queue = repo.queue
    assert isinstance(queue, PostgresQueue)
    sent: list[str] = []
    for write in (True, False):
        conn = await queue._connection(write)
        conn.add_query_logger(lambda record: sent.append(record.query.split()[0].rstrip(";").upper()))
    return sent


async def test_postgres_next_due_reads_are_one_statement_each(pg_url: str) -> None:
    # The worker asks when the next delivery is due at every idle poll: one SELECT is its own snapshot, so it
    # goes alone (one round trip), not inside BEGIN ... COMMIT; a cycle that writes keeps its transaction.
    repo = await SqlRepository.open(pg_url)
    try:
        await _setup(repo, 2)
        sent = await _statements_sent(repo)
        assert await repo.next_due() == T0
        assert await repo.next_due_after(T0) == T0 + dt.timedelta(seconds=1)
        await asyncio.sleep(0.05)  # asyncpg calls its query loggers soon after, not at once
        assert sent == ["SELECT", "SELECT"]
        sent.clear()
        await repo.claim_due(T0, 1, T0 + MINUTE, "wrk_a")
        await asyncio.sleep(0.05)
        assert sent[0] == "BEGIN" and sent[-1] == "COMMIT", sent
    finally:
        await repo.close()


async def test_postgres_cycle_writes_its_results_in_one_statement(pg_url: str) -> None:
    # A cycle's results (attempts, counts, deliveries, queue rows done and retried) are one round trip on
    # PostgreSQL, then the claim: what they write is what the statements one by one wrote.
    repo = await SqlRepository.open(pg_url)
    try:
        await _setup(repo, 4)
        now = T0 + MINUTE
        done, retried, ok = (c.delivery for c in await repo.claim_due(now, 3, now + MINUTE, "wrk_a"))
        later = now + dt.timedelta(seconds=30)
        written = [
            Stored(done.id, "we_claims", _attempt(done.id, done.event_id, now), DeliveryStatus.SUCCEEDED,
                   None, True),
            Stored(retried.id, "we_claims", dc.replace(_attempt(retried.id, retried.event_id, now),
                   outcome="failed", response_status=500), DeliveryStatus.PENDING, later, True),
        ]  # fmt: skip
        await repo.record_outcomes(written, "wrk_a", now)  # its statements prepared, as in a running worker
        succeeded = [
            Stored(
                ok.id, "we_claims", _attempt(ok.id, ok.event_id, now), DeliveryStatus.SUCCEEDED, None, True
            ),
            Stored("msg_not_ours", "we_claims", None, DeliveryStatus.SUCCEEDED, None, False),
        ]
        sent = await _statements_sent(repo)
        _alerts, claims = await repo.record_and_claim(succeeded, "wrk_a", now, 10, now + MINUTE)
        await asyncio.sleep(0.05)  # asyncpg calls its query loggers soon after, not at once
        assert sent == ["BEGIN", "WITH", "WITH", "COMMIT"], sent
        # Only the fourth is claimed: the retry waits for its time.
        assert [c.delivery.event_id for c in claims] == ["evt_003"]
        by_id = {d.id: d for d in await repo.list_deliveries(DeliveryFilter(ACCT, "live"), 10, None)}
        assert [by_id[d.id].status for d in (done, retried, ok)] == [
            DeliveryStatus.SUCCEEDED, DeliveryStatus.PENDING, DeliveryStatus.SUCCEEDED
        ]  # fmt: skip
        assert all(by_id[d.id].attempt_count == 1 for d in (done, retried, ok))
        assert by_id[retried.id].next_attempt_at == later
        async with repo.engine.connect() as c:
            queued = dict((await c.execute(sa.select(pending.c.id, pending.c.lease_owner))).all())
            attempts = (await c.exec_driver_sql("SELECT count(*) FROM wh_attempts")).scalar()
            counted = (await c.exec_driver_sql("SELECT sum(count) FROM wh_delivery_counts")).scalar()
        assert done.id not in queued and ok.id not in queued and queued[retried.id] is None
        assert attempts == 3 and counted == 6  # each attempt in its hour and its day
    finally:
        await repo.close()


async def test_postgres_claim_walks_the_due_index_whatever_the_statistics(pg_url: str) -> None:
    # A burst fanned out since the last ANALYZE: the planner's guess is "a few pending rows", which made
    # it scan every due row into a bitmap and sort them all for each claim of a few.
    repo = await SqlRepository.open(pg_url)
    try:
        ep = await _setup(repo, 1)
        async with repo.engine.begin() as conn:
            await conn.exec_driver_sql(
                "INSERT INTO wh_deliveries (id, event_id, endpoint_id, account_id, environment, event_type,"
                " status, attempt_count, schedule_count, due_at, next_attempt_at, created_at, updated_at)"
                " SELECT 'msg_' || i, 'evt_000', $1, $2, 'live', 'booking.confirmed', 'pending', 0, 0,"
                " $3, $3, $3, $3 FROM generate_series(1, 20000) AS i",
                (ep.id, ACCT, 1),
            )
            await conn.exec_driver_sql(
                "INSERT INTO wh_pending (id, endpoint_id, account_id, environment, attempt_count,"
                " next_attempt_at) SELECT 'msg_' || i, $1, $2, 'live', 0, $3"
                " FROM generate_series(1, 20000) AS i",
                (ep.id, ACCT, 1),
            )
        queue = repo.queue
        assert isinstance(queue, PostgresQueue)
        conn = await queue._connection()
        claim = q.STATEMENTS["claim"].postgres_text()
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(f"EXPLAIN {claim}", 10**16, "wrk_a", 10**15, 50, *["[]"] * 6, -1, "[]")
        )
        assert "Index Scan using wh_pending_due" in plan
        # No sort of the due rows (the only sort is of the ids claimed, for the UPDATE's join: at most the
        # limit, and the heads of the ordering keys the last results freed).
        assert "Bitmap" not in plan and "next_attempt_at" not in "".join(
            line for line in plan.splitlines() if "Sort Key" in line
        ), plan
        # A claim after a full walk (``webhookd._claim_walks``) reads only its range of the due index.
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                f"EXPLAIN {claim}", 10**16, "wrk_a", 10**15, 50, *["[]"] * 6, 10**14, "[]"
            )
        )
        lines = plan.splitlines()
        walk = lines[next(i for i, line in enumerate(lines) if "using wh_pending_due" in line) + 1]
        assert "Index Cond:" in walk, plan
        assert "(next_attempt_at <= '1000000000000000'::bigint)" in walk, plan
        assert "(next_attempt_at > '100000000000000'::bigint)" in walk, plan
    finally:
        await repo.close()


async def test_a_claim_after_a_full_walk_looks_only_at_what_came_due_since(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 5)  # due at T0, T0 + 1 s, ... T0 + 4 s
        now = T0 + MINUTE
        after = Skips(after=us(T0 + dt.timedelta(seconds=2)))
        _alerts, claims = await repo.record_and_claim([], "wrk_a", now, 10, now + MINUTE, after)
        assert [c.delivery.event_id for c in claims] == ["evt_003", "evt_004"]
        claims = await repo.claim_due(now, 10, now + MINUTE, "wrk_a")  # a full walk finds the rest
        assert [c.delivery.event_id for c in claims] == ["evt_000", "evt_001", "evt_002"]
        if db_url.startswith("sqlite"):
            queue = repo.queue
            assert isinstance(queue, SqliteQueue)
            plan = queue._conn().execute(f"EXPLAIN QUERY PLAN {q.STATEMENTS['claim'].sqlite_text()}",
                                         (1, "w", 1, 1, *["[]"] * 6, 0, "[]")).fetchall()  # fmt: skip
            assert any("wh_pending_due (next_attempt_at>? AND next_attempt_at<?)" in r[-1] for r in plan), (
                plan
            )
    finally:
        await repo.close()


async def test_a_claim_takes_the_next_delivery_of_each_ordering_key_its_results_freed(db_url: str) -> None:
    # Three deliveries of one key, long due: the head is claimed and finished; the next claim looks only at
    # what came due since (``after``), and still takes the key's new head by name, and only that one.
    repo = await SqlRepository.open(db_url)
    try:
        ep = await _setup(repo, 0)
        rows, queued = [], []
        for i in range(3):
            at = us(T0 + dt.timedelta(seconds=i))
            rows.append(
                {
                    "id": f"evt_k{i}",
                    "account_id": ACCT,
                    "environment": "live",
                    "type": "booking.confirmed",
                    "state": "confirmed",
                    "created_at": at,
                    "envelope": b"{}",
                    "idempotency_key": None,
                }
            )
            queued.append((f"msg_k{i}", f"evt_k{i}", at, i))
        async with repo.engine.begin() as conn:
            await conn.execute(events.insert(), rows)
            await conn.execute(
                deliveries.insert(),
                [
                    {
                        "id": m,
                        "event_id": e,
                        "endpoint_id": ep.id,
                        "account_id": ACCT,
                        "environment": "live",
                        "event_type": "booking.confirmed",
                        "status": "pending",
                        "attempt_count": 0,
                        "schedule_count": 0,
                        "due_at": at,
                        "next_attempt_at": None,
                        "lease_owner": None,
                        "created_at": at,
                        "updated_at": at,
                        "ordering_key": "bk_1",
                        "event_seq": seq,
                    }
                    for m, e, at, seq in queued
                ],
            )
            await conn.execute(pending.insert(), [
                {"id": m, "endpoint_id": ep.id, "account_id": ACCT, "environment": "live", "attempt_count": 0,
                 "next_attempt_at": at, "lease_owner": None, "ordering_key": "bk_1", "event_seq": seq}
                for m, _e, at, seq in queued
            ])  # fmt: skip
        now = T0 + MINUTE
        (head,) = await repo.claim_due(now, 10, now + MINUTE, "wrk_a")  # the others wait for it
        assert head.delivery.id == "msg_k0"
        attempt = _attempt("msg_k0", "evt_k0", now)
        done = Stored("msg_k0", ep.id, attempt, DeliveryStatus.SUCCEEDED, None, counts_attempt=True)
        later = Skips(after=us(now), freed=((ep.id, "bk_1"),))
        _alerts, claims = await repo.record_and_claim([done], "wrk_a", now, 10, now + MINUTE, later)
        assert [c.delivery.id for c in claims] == ["msg_k1"]
        assert await repo.record_and_claim([], "wrk_a", now, 10, now + MINUTE, later) == ([], [])
    finally:
        await repo.close()


async def test_revision_0009_moves_the_waiting_deliveries_and_their_leases_into_the_queue(
    db_url: str,
) -> None:
    # A database from before the queue had its table of its own: three pending deliveries, one of them
    # leased by a process of the previous release, one succeeded. Nothing waiting may be lost or sent twice.
    repo = await SqlRepository.open(db_url)
    try:
        await _setup(repo, 4)
        now = T0 + MINUTE
        lease = now + MINUTE
        [done] = await repo.claim_due(now, 1, lease, "wrk_old")
        ok = Stored(done.delivery.id, "we_claims", _attempt(done.delivery.id, done.delivery.event_id, now),
                    DeliveryStatus.SUCCEEDED, None, True)  # fmt: skip
        await repo.record_outcomes([ok], "wrk_old", now)
        [leased] = await repo.claim_due(now, 1, lease, "wrk_old")
        assert await downgrade(repo.engine, SCHEMA, "0008") == "0008"
        async with repo.engine.connect() as conn:
            rows = (await conn.execute(sa.select(deliveries.c.event_id, deliveries.c.lease_owner))).all()
        assert sorted(rows) == [
            ("evt_000", None),
            ("evt_001", "wrk_old"),
            ("evt_002", None),
            ("evt_003", None),
        ]
    finally:
        await repo.close()
    repo = await SqlRepository.open(db_url)  # upgrades to 0009 again
    try:
        assert (await repo.queue.stats(now)).queue_depth == 3
        claims = await repo.claim_due(now, 10, lease + MINUTE, "wrk_new")
        assert [c.delivery.event_id for c in claims] == ["evt_002", "evt_003"]  # evt_001's lease holds
        [again] = await repo.claim_due(lease, 10, lease + MINUTE, "wrk_new")  # until it runs out
        assert again.delivery.id == leased.delivery.id
        assert again.delivery.next_attempt_at == T0 + dt.timedelta(seconds=1)  # due when it was due
        late = Stored(leased.delivery.id, "we_claims", _attempt(leased.delivery.id, "evt_001", lease),
                      DeliveryStatus.SUCCEEDED, None, True)  # fmt: skip
        await repo.record_outcomes([late], "wrk_old", lease)  # the old holder's result: not its lease now
        assert (await repo.get_delivery(leased.delivery.id)).status is DeliveryStatus.PENDING  # type: ignore[union-attr]
    finally:
        await repo.close()

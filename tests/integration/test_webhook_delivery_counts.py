"""Delivery counts in webhookd on SQLite and PostgreSQL: every attempt (a manual resend too) is counted per
endpoint and outcome in the same transaction that writes it, so QueryDeliveryCounts equals the attempt log
exactly (0 difference) while deliveries succeed, fail with an HTTP error and fail to connect; grouped by
hour and by day; bad ranges refused naming the field; and the prune keeps each grain its retention."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import ssl
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
import trustme

from svckit.errors import type_from_rpc_error
from svckit.protos import timestamp as ts
from svckit.prototables import ATTEMPT_OUTCOME
from svckit.usagecounts import LATENCY_BOUNDS_MS
from tests.support import event_data, free_port
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._delivery_counts import DAY, HOUR, RETENTION
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Receiver

ACCT = "acct_counts1"
LIVE = pb.ENVIRONMENT_LIVE


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, str]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return server_ctx, str(path)


@pytest.fixture
def receiver(tls: tuple[ssl.SSLContext, str]) -> Iterator[Receiver]:
    # /ok answers 200, /bad 500 (an http_error, retried later).
    r = Receiver(tls[0], responder=lambda req: 200 if req.path == "/ok" else 500).start()
    yield r
    r.stop()


@pytest.fixture
async def app(db_url: str, tls: tuple[ssl.SSLContext, str]) -> AsyncIterator[Webhookd]:
    running = await run_server(
        Config(database=db_url, listen="127.0.0.1:0", policy=Policy(allow_private=True), ca_bundle=tls[1])
    )
    yield running
    await running.stop(0)


def closed_port() -> int:
    """A loopback port nothing listens on (a connection there is refused: network_error)."""
    return free_port()


def window(
    group: pb.DeliveryCountGroup.ValueType = pb.DELIVERY_COUNT_GROUP_UNSPECIFIED,
) -> pb.QueryDeliveryCountsRequest:
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    req = pb.QueryDeliveryCountsRequest(account_id=ACCT, environment=LIVE, group_by=group)
    getattr(req, "from").CopyFrom(ts(today - dt.timedelta(days=1)))
    req.to.CopyFrom(ts(today + dt.timedelta(days=1)))
    return req


async def attempt_log(stub: webhooks_pb2_grpc.WebhookServiceStub) -> collections.Counter[tuple[str, str]]:
    """Every attempt of the account, counted per (endpoint, outcome)."""
    out: collections.Counter[tuple[str, str]] = collections.Counter()
    token = ""
    while True:
        page = await stub.ListAttempts(
            pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, page_size=100, page_token=token)
        )
        for a in page.attempts:
            out[(a.endpoint_id, str(ATTEMPT_OUTCOME.word(a.outcome)))] += 1
        token = page.next_page_token
        if not token:
            return out


async def test_counts_equal_the_attempt_log(app: Webhookd, receiver: Receiver) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
        ids = []
        for url in (receiver.url("/ok"), receiver.url("/bad"), f"https://127.0.0.1:{closed_port()}/hook"):
            reg = await stub.RegisterEndpoint(
                pb.RegisterEndpointRequest(
                    account_id=ACCT, environment=LIVE, url=url, events=["booking.confirmed"]
                )
            )
            ids.append(reg.endpoint.id)
        events = 12
        for _ in range(events):
            await stub.PublishEvent(
                pb.PublishEventRequest(
                    account_id=ACCT,
                    environment=LIVE,
                    type="booking.confirmed",
                    data=event_data("booking.confirmed"),
                )
            )
        # Every event delivered to the good endpoint, and the failing two tried (their circuit breakers open
        # after a few failures: what waits for a probe is not attempted).
        for _ in range(300):
            log = await attempt_log(stub)
            if (
                log[(ids[0], "succeeded")] == events
                and log[(ids[1], "http_error")]
                and log[(ids[2], "network_error")]
            ):
                break
            await asyncio.sleep(0.1)
        # A manual resend is an attempt too, counted the same way.
        first = await stub.ListAttempts(
            pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, endpoint_id=ids[0], page_size=1)
        )
        await stub.ResendAttempt(
            pb.ResendAttemptRequest(account_id=ACCT, environment=LIVE, attempt_id=first.attempts[0].id)
        )
        # The log and the counts, read until the log holds still around the read of the counts (retries
        # keep coming): then the two must be equal, to the attempt.
        for _ in range(100):
            before = await attempt_log(stub)
            counts = await stub.QueryDeliveryCounts(window())
            after = await attempt_log(stub)
            if before == after:
                break
        else:
            raise AssertionError("the attempt log never held still")
        got = {(c.endpoint_id, c.outcome): c.count for c in counts.counts}
        assert got == dict(before)
        assert got[(ids[0], "succeeded")] == events + 1
        assert got[(ids[1], "http_error")] >= 1 and got[(ids[2], "network_error")] >= 1
        assert set(got) == {(ids[0], "succeeded"), (ids[1], "http_error"), (ids[2], "network_error")}
        ok = next(c for c in counts.counts if c.endpoint_id == ids[0])
        assert sum(ok.latency_buckets) == ok.count and 0 < ok.p50_ms <= ok.p95_ms <= ok.p99_ms
        assert tuple(counts.latency_bounds_ms) == LATENCY_BOUNDS_MS

        by_hour = await stub.QueryDeliveryCounts(window(pb.DELIVERY_COUNT_GROUP_HOUR))
        assert sum(c.count for c in by_hour.counts) == sum(got.values())
        assert all(c.period_start.seconds % HOUR == 0 for c in by_hour.counts)
        by_day = await stub.QueryDeliveryCounts(window(pb.DELIVERY_COUNT_GROUP_DAY))
        assert all(c.period_start.seconds % DAY == 0 for c in by_day.counts)
        assert sum(c.count for c in by_day.counts) >= sum(got.values())  # retries go on meanwhile

        one = window()
        one.endpoint_id = ids[0]
        assert [(c.endpoint_id, c.count) for c in (await stub.QueryDeliveryCounts(one)).counts] == [
            (ids[0], events + 1)
        ]


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        (dt.timedelta(hours=1, minutes=30), dt.timedelta(hours=3), "from, to"),
        (dt.timedelta(hours=3), dt.timedelta(hours=1), "to"),
        (-RETENTION[HOUR] - dt.timedelta(days=2), dt.timedelta(hours=1), "from"),
    ],
)
async def test_bad_ranges_name_the_field(
    app: Webhookd, start: dt.timedelta, end: dt.timedelta, field: str
) -> None:
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    req = pb.QueryDeliveryCountsRequest(
        account_id=ACCT, environment=LIVE, group_by=pb.DELIVERY_COUNT_GROUP_HOUR
    )
    getattr(req, "from").CopyFrom(ts(hour + start))
    req.to.CopyFrom(ts(hour + end))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await webhooks_pb2_grpc.WebhookServiceStub(channel).QueryDeliveryCounts(req)
    etype, message = type_from_rpc_error(info.value)
    assert etype == "invalid_request" and message.startswith(field), message


async def test_prune_keeps_each_grain_its_retention(app: Webhookd) -> None:
    queue = app.repo.queue
    # Now: the app's own housekeeping prunes by the real clock meanwhile, and must agree.
    now = dt.datetime.now(dt.UTC)

    def row(grain: int, age: dt.timedelta) -> tuple[object, ...]:
        at = int((now - age).timestamp())
        return (ACCT, "live", grain, at - at % grain, "we_x", "succeeded", 1, 1, 1, *([0] * 11))

    rows = [
        row(HOUR, dt.timedelta(days=1)),
        row(HOUR, RETENTION[HOUR] + dt.timedelta(days=1)),  # pruned
        row(DAY, RETENTION[HOUR] + dt.timedelta(days=1)),
        row(DAY, RETENTION[DAY] + dt.timedelta(days=2)),  # pruned
    ]
    from webhookd._queue import one

    await queue._run(one("count_attempts", rows))
    await app.repo.purge_delivery_counts(now)
    left = await app.repo.query_delivery_counts(ACCT, "live", now - dt.timedelta(days=800), now, DAY, 0)
    assert sum(r.count for r in left) == 1
    hours = await app.repo.query_delivery_counts(ACCT, "live", now - dt.timedelta(days=800), now, HOUR, 0)
    assert sum(r.count for r in hours) == 1

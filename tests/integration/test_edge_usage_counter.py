"""The edge's usage counter (edge.usagecounts) against a real authsvc: cells summed per key, route,
status, error type and minute with their histograms; a batch authsvc did not take stays pending and is
sent again with the same batch id (counted once); and counting an existing cell allocates nothing that
stays (the request path adds to integers)."""

from __future__ import annotations

import datetime as dt
import gc
import tracemalloc

from authsvc.testing import new_account, running_authsvc
from edge.usagecounts import UsageCounter, method_word
from svckit.clients import AuthClient
from svckit.protos import timestamp as ts
from tests.support import free_port
from travel.auth.v1 import auth_pb2 as pb

ROUTE = "v1/hotels/offers/<offer_id:str>"


def closed_port() -> int:
    return free_port()


async def counted(stub: object, acct: str, *groups: pb.UsageGroup.ValueType) -> list[pb.UsageRow]:
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    query = pb.QueryUsageCountsRequest(account_id=acct, group_by=list(groups))
    getattr(query, "from").CopyFrom(ts(today - dt.timedelta(days=1)))
    query.to.CopyFrom(ts(today + dt.timedelta(days=1)))
    return list((await stub.QueryUsageCounts(query)).rows)  # type: ignore[attr-defined]


async def test_cells_are_sent_once_even_when_a_flush_fails(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        acct = (await new_account(stub)).id
        now = dt.datetime.now(dt.UTC).timestamp()
        dead = AuthClient(f"127.0.0.1:{closed_port()}", None, timeout=0.5)
        counter = UsageCounter(dead, batch=2)
        for latency in (0.001, 0.002, 0.3):
            counter.count(acct, "live", "key_a", "GET", ROUTE, 200, "", now, latency)
        counter.count(acct, "live", "key_a", "GET", ROUTE, 404, "not_found", now, 0.004)
        counter.count(acct, "sandbox", "key_b", "POST", "", 400, "invalid_request", now, 0.02)
        counter.count(acct, "live", "key_a", "GET", ROUTE, 200, "", now - 60, 0.001)  # the minute before
        assert len(counter.cells) == 4
        # authsvc unreachable: nothing is lost, the batches wait.
        assert await counter.flush() is False
        assert not counter.cells and sum(len(r.counts) for _, r in counter.pending) == 4
        first_id = counter.pending[0][0]
        # Counts made meanwhile go into new cells and a later batch.
        counter.count(acct, "live", "key_a", "GET", ROUTE, 200, "", now, 0.001)
        await dead.close()
        async with AuthClient(f"127.0.0.1:{server.port}", None) as live:
            counter.auth = live
            # The first batch's answer is lost after it was applied: sent again, it is not counted twice.
            _, first = counter.pending[0]
            assert (await live.record_usage_counts(first)).applied == 2
            assert await counter.flush() is True
            assert not counter.pending
            again = await live.record_usage_counts(
                pb.RecordUsageCountsRequest(batch_id=first_id, counts=first.counts)
            )
            assert again.duplicate
        rows = await counted(stub, acct, pb.USAGE_GROUP_KEY, pb.USAGE_GROUP_ROUTE, pb.USAGE_GROUP_STATUS)
        got = {(r.counts.key_id, r.counts.route, r.counts.status): r.counts.count for r in rows}
        assert got == {
            ("key_a", "GET /v1/hotels/offers/{offer_id}", 200): 5,
            ("key_a", "GET /v1/hotels/offers/{offer_id}", 404): 1,
            ("key_b", "", 400): 1,
        }
        ok = next(r for r in rows if r.counts.status == 200)
        # 0.3 s is in the 250-500 ms bucket; the others in the first: p50 5 ms, p99 500 ms.
        assert (ok.latency.p50_ms, ok.latency.p99_ms) == (5, 500)
        assert ok.counts.latency_sum_ms == 1 + 2 + 300 + 1 + 1


def test_counting_an_existing_cell_keeps_no_allocation() -> None:
    counter = UsageCounter(None)
    now = 1_800_000_000.0
    counter.count("acct_a", "live", "key_a", "GET", ROUTE, 200, "", now, 0.001)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(10_000):
            counter.count("acct_a", "live", "key_a", "GET", ROUTE, 200, "", now, 0.001)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (cell,) = counter.cells.values()
    assert cell[0] == 10_001
    # What stays after 10,000 counts: the float sum's one object at most, never per request.
    assert after - before < 1_000, after - before


def test_made_up_methods_are_one_cell() -> None:
    """A client sending a new token as the method of each refused request must not make a cell each: the
    cells are bounded by keys x routes x statuses, whatever is sent."""
    counter = UsageCounter(None)
    for n in range(500):
        counter.count("", "", "", method_word(f"X{n}"), "", 404, "not_found", 1_800_000_000.0, 0.001)
    for known in ("GET", "DELETE"):
        counter.count("", "", "", method_word(known), "", 404, "not_found", 1_800_000_000.0, 0.001)
    assert sorted(k[3] for k in counter.cells) == ["DELETE", "GET", "OTHER"]
    assert counter.cells[("", "", "", "OTHER", "", 404, "not_found", 30_000_000)][0] == 500

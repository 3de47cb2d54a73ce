"""The SQLite queue's WAL checkpointer works only after the queue changed a row: an idle webhookd (its worker
claims every poll and finds nothing) copies nothing back, twice a second, for nothing; a claim or a result
that changed rows is checkpointed at the next interval."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib

import pytest

from svckit.webhook_status import EndpointStatus
from webhookd import _sqlite_queue
from webhookd._repository import EndpointRecord, EventRecord, SigningSecret
from webhookd._sql import SqlRepository
from webhookd._sqlite_queue import SqliteQueue

T0 = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.UTC)
ACCT = "acct_ckpt"


def _endpoint() -> EndpointRecord:
    secrets = [SigningSecret("whsec_" + "C" * 44)]
    url = "https://hooks.partner.test/h"
    return EndpointRecord(
        "we_ckpt", ACCT, "live", url, ["booking.confirmed"], "", EndpointStatus.ENABLED, "", T0, T0, secrets
    )


async def _until(condition: object, seconds: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_checkpoints_follow_changed_rows_only(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite_queue, "CHECKPOINT_SECONDS", 0.02)
    repo = await SqlRepository.open(f"sqlite+aiosqlite:///{tmp_path / 'ckpt.db'}")
    try:
        queue = repo.queue
        assert isinstance(queue, SqliteQueue)
        lease = T0 + dt.timedelta(seconds=60)
        # Nothing queued: the claim (a write transaction) changes no row, so nothing is marked to copy back.
        assert await repo.claim_due(T0, 10, lease, "wrk_idle") == []
        await asyncio.sleep(0.1)
        assert not queue._written.is_set()
        await repo.create_endpoint(_endpoint())
        event = EventRecord(
            "evt_ckpt", ACCT, "live", "booking.confirmed", "confirmed", T0, b'{"id":"evt_ckpt"}'
        )
        await repo.publish(event, "", T0)
        # Stop the checkpointer's clearing for a moment to see the mark a claim that leased a row leaves.
        monkeypatch.setattr(_sqlite_queue, "CHECKPOINT_SECONDS", 3600)
        await asyncio.sleep(0.05)  # the checkpointer's current wait (0.02 s) ends; the next one is long
        claimed = await repo.claim_due(T0 + dt.timedelta(seconds=1), 10, lease, "wrk_busy")
        assert [c.delivery.event_id for c in claimed] == ["evt_ckpt"]
        assert queue._written.is_set()
    finally:
        await repo.close()


async def test_a_changed_row_is_checkpointed_and_the_mark_cleared(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite_queue, "CHECKPOINT_SECONDS", 0.02)
    repo = await SqlRepository.open(f"sqlite+aiosqlite:///{tmp_path / 'ckpt.db'}")
    try:
        queue = repo.queue
        assert isinstance(queue, SqliteQueue)
        await repo.create_endpoint(_endpoint())
        event = EventRecord(
            "evt_ckpt", ACCT, "live", "booking.confirmed", "confirmed", T0, b'{"id":"evt_ckpt"}'
        )
        await repo.publish(event, "", T0)
        claimed = await repo.claim_due(T0 + dt.timedelta(seconds=1), 10, T0 + dt.timedelta(seconds=60), "w")
        assert len(claimed) == 1
        assert await _until(lambda: not queue._written.is_set())
    finally:
        await repo.close()

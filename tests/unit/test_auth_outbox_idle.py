"""The outbox relay backs off while it finds nothing (``svckit.idlewait``), never past a retry it scheduled,
and a row written while a pass runs (its wake) is not lost: the next pass runs at once."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import grpc
import pytest

from authsvc import _outbox
from authsvc._model import OutboxEvent
from authsvc._outbox import OutboxRelay, backoff
from svckit.clients import ClientError
from svckit.vocabulary import Environment

NOW = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)
EVENT = OutboxEvent("obx_1", "acct_1", Environment.LIVE, "apikey.revoked", "final", {}, NOW)


class Repo:
    """Each pass's claim from a script: a list of events, "wake" (a row written during the pass: none
    claimed yet), or the end."""

    def __init__(self, relay: list[OutboxRelay], passes: list[Any]) -> None:
        self.relay, self.passes = relay, passes

    async def outbox_backlog(self) -> tuple[int, float | None]:
        return 0, None

    async def purge_outbox(self, before: dt.datetime) -> int:
        return 0

    async def claim_outbox(self, now: dt.datetime, lease: float) -> list[OutboxEvent]:
        if not self.passes:
            raise asyncio.CancelledError
        this = self.passes.pop(0)
        if this == "wake":
            self.relay[0].wakeup.set()
            return []
        return list(this)

    async def mark_failed(self, event_id: str, error: str, retry_at: dt.datetime) -> None:
        pass


class Hooks:
    async def publish_event(self, request: Any, *, retry: bool) -> None:
        raise ClientError("unavailable", "webhookd away", code=grpc.StatusCode.UNAVAILABLE)


def _waits(monkeypatch: pytest.MonkeyPatch, passes: list[Any]) -> tuple[list[int], list[float]]:
    """The empty-pass count each wait was worked out from, and the waits themselves."""
    counts: list[int] = []
    waits: list[float] = []

    def record(empty: int, first: float, most: float) -> float:
        counts.append(empty)
        assert (first, most) == (1.0, _outbox.IDLE_MAX)
        return 100.0

    async def wait_for(aw: Any, seconds: float) -> None:
        waits.append(seconds)
        aw.close()

    monkeypatch.setattr(_outbox, "idle_wait", record)
    monkeypatch.setattr(asyncio, "wait_for", wait_for)
    holder: list[OutboxRelay] = []
    relay = OutboxRelay(Repo(holder, passes), "127.0.0.1:1", poll_interval=1.0)  # type: ignore[arg-type]
    holder.append(relay)
    relay._hooks = Hooks()  # type: ignore[assignment]
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(relay._run())
    return counts, waits


def test_empty_passes_back_off_and_a_wake_during_a_pass_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    counts, waits = _waits(monkeypatch, [[], [], [], "wake", [], []])
    assert counts == [1, 2, 3, 4, 0, 1]  # the pass after the wake counts as woken
    assert waits == [100.0] * 6


def test_a_failed_publish_ends_the_wait_at_its_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    _counts, waits = _waits(monkeypatch, [[], [], [EVENT]])
    assert waits[:2] == [100.0, 100.0]
    assert 0 < waits[2] <= backoff(1, _outbox.BACKOFF_BASE, _outbox.BACKOFF_CAP)

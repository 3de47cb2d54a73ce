"""The notice relay backs off while it finds nothing (``svckit.idlewait``): each empty pass in a row counts,
and a pass that published something, or was woken by the worker, starts the count over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from svckit.clock import FakeClock
from webhookd import _notices
from webhookd._notices import NoticeRelay


def test_empty_passes_back_off_and_work_or_a_wake_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    # What each pass publishes ("wake": none, and the worker woke the relay during the pass before).
    found: list[int | str] = [0, 0, 0, 2, 0, 0, "wake", 0, 0]
    counts: list[int] = []

    def record(empty: int, first: float, most: float) -> float:
        counts.append(empty)
        assert (first, most) == (1.0, _notices.IDLE_MAX_SECONDS)
        return 0.0

    monkeypatch.setattr(_notices, "idle_wait", record)
    relay = NoticeRelay(Any, FakeClock())  # type: ignore[arg-type]

    async def publish_pending() -> int:
        this = found.pop(0)
        if not found:
            relay._stopping = True
        if this == "wake":
            return 0
        if found and found[0] == "wake":
            relay.wake()  # the worker wrote a notice while this pass ran
        assert isinstance(this, int)
        return this

    relay.publish_pending = publish_pending  # type: ignore[method-assign]
    asyncio.run(relay.run())
    assert counts == [1, 2, 3, 0, 1, 2, 0, 1, 2]

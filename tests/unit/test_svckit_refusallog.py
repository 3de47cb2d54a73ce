"""Refused requests logged as counts (svckit.refusallog): the pure tally by table, and the logger over a
flood."""

from __future__ import annotations

import asyncio
import logging

import pytest

from svckit.refusallog import SUMMARY, RefusalLog, RefusalTally


@pytest.mark.parametrize(
    ("events", "emitted"),
    [
        # (kind, time) in order -> what each add returns
        ([("a", 0.0)], [{"a": 1}]),  # the first after a quiet spell: at once
        ([("a", 0.0), ("a", 0.5), ("b", 0.9)], [{"a": 1}, None, None]),
        ([("a", 0.0), ("a", 0.5), ("b", 1.0)], [{"a": 1}, None, {"a": 1, "b": 1}]),
        ([("a", 0.0), ("a", 5.0)], [{"a": 1}, {"a": 1}]),
        (
            [("a", 0.0), ("a", 0.1), ("a", 0.2), ("b", 1.2), ("a", 1.3)],
            [{"a": 1}, None, None, {"a": 2, "b": 1}, None],
        ),
    ],
)
def test_tally(events: list[tuple[str, float]], emitted: list[dict[str, int] | None]) -> None:
    tally = RefusalTally(interval=1.0)
    assert [tally.add(kind, now) for kind, now in events] == emitted


def test_tally_due_and_wait() -> None:
    tally = RefusalTally(interval=1.0)
    assert tally.due(0.0) is None and tally.wait(0.0) == 0.0  # nothing pending
    tally.add("a", 10.0)
    tally.add("a", 10.25)
    assert tally.due(10.5) is None and tally.wait(10.5) == pytest.approx(0.5)
    assert tally.due(11.0) == {"a": 1} and tally.counts == {}


async def test_a_flood_is_one_line_then_the_tail_in_one_more(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    refusals = RefusalLog(logging.getLogger("test.refusals"), interval=0.05, clock=lambda: now[0])
    caplog.set_level(logging.INFO, "test.refusals")
    for i in range(2000):
        refusals.add("invalid_api_key" if i % 2 else "not_found")
    lines = [r for r in caplog.records if r.getMessage() == SUMMARY]
    assert len(lines) == 1 and lines[0].__dict__["total"] == 1
    now[0] += 0.1
    for _ in range(100):  # the timer logs the tail (no further refusal needed)
        if len([r for r in caplog.records if r.getMessage() == SUMMARY]) == 2:
            break
        await asyncio.sleep(0.01)
    lines = [r for r in caplog.records if r.getMessage() == SUMMARY]
    assert len(lines) == 2
    assert lines[1].__dict__["counts"] == {"invalid_api_key": 1000, "not_found": 999}
    assert sum(r.__dict__["total"] for r in lines) == 2000

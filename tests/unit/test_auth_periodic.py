"""authsvc._periodic: a background chore runs at start and again after a failure (logged under its own
module's logger, naming it), and stops when asked."""

from __future__ import annotations

import asyncio
import logging

import pytest

from authsvc._periodic import Periodic

log = logging.getLogger("tests.periodic")


class Chore(Periodic):
    task_name = "test-chore"
    failure = "test chore failed; will retry"
    log = log

    def __init__(self, outcomes: list[int | Exception]) -> None:
        super().__init__(interval=0)
        self.outcomes = outcomes
        self.runs = 0
        self.done = asyncio.Event()

    async def once(self) -> int:
        if not self.outcomes:
            await asyncio.Event().wait()  # every outcome given: wait here until stopped
        self.runs += 1
        outcome = self.outcomes.pop(0)
        if not self.outcomes:
            self.done.set()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


async def test_a_failed_run_is_logged_and_the_next_one_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    chore = Chore([RuntimeError("storage away"), 3, 0])
    with caplog.at_level(logging.ERROR, logger="tests.periodic"):
        chore.start()
        await chore.done.wait()
        await chore.stop()
    assert chore.runs == 3
    failed = [r for r in caplog.records if r.name == "tests.periodic"]
    assert [r.getMessage() for r in failed] == ["test chore failed; will retry"]
    assert failed[0].exc_info is not None


async def test_stop_ends_the_task_and_is_safe_before_start() -> None:
    idle = Chore([0])
    await idle.stop()  # never started: nothing to cancel
    chore = Chore([1, 2])
    chore.start()
    await chore.done.wait()
    task = chore._task
    await chore.stop()
    assert task is not None and task.done() and task.get_name() == "test-chore"

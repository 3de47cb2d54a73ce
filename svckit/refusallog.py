"""Refused requests logged as counts, never one line each: a flood of refusals (bad keys, unknown paths,
no session) must not become a flood of log lines (a client could otherwise fill the disk or drown
what matters). The edge and the portal both use it; the per-status metrics still count every one.

``RefusalTally`` is the pure rule: each refusal is counted by type; a summary is due when counts are
pending and ``interval`` seconds have passed since the last summary (the first refusal after a quiet
spell is due at once). ``RefusalLog`` applies it on the running loop: it logs what is due, and arms one
timer so the counts of a burst's tail are logged ``interval`` after the previous summary.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from svckit.logs import request_id_var

SUMMARY = "refused requests"


@dataclass
class RefusalTally:
    interval: float = 1.0
    counts: dict[str, int] = field(default_factory=dict)
    last: float | None = None

    def add(self, kind: str, now: float) -> dict[str, int] | None:
        """Count one refusal of ``kind``; the counts to log now (and reset), or None."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return self.due(now)

    def due(self, now: float) -> dict[str, int] | None:
        if not self.counts or (self.last is not None and now - self.last < self.interval):
            return None
        counts, self.counts, self.last = self.counts, {}, now
        return counts

    def wait(self, now: float) -> float:
        """Seconds until pending counts are due (0: now)."""
        if self.last is None:
            return 0.0
        return max(self.interval - (now - self.last), 0.0)


class RefusalLog:
    """``RefusalTally`` logging to ``logger`` at INFO: ``refused requests`` with ``counts`` (by type)
    and ``total``."""

    def __init__(
        self, logger: logging.Logger, interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = logger
        self.tally = RefusalTally(interval)
        self.clock = clock
        self.timer: asyncio.TimerHandle | None = None
        self.timer_loop: asyncio.AbstractEventLoop | None = None

    def add(self, kind: str) -> None:
        counts = self.tally.add(kind, self.clock())
        if counts is not None:
            self._emit(counts)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test calling a handler directly): the next refusal logs it
            return
        # One timer at a time, on the running loop (one of an earlier, now closed loop never fires).
        if self.timer is None or self.timer_loop is not loop:
            self.timer, self.timer_loop = loop.call_later(self.tally.wait(self.clock()), self.flush), loop

    def flush(self) -> None:
        self.timer = None
        counts = self.tally.due(self.clock())
        if counts is not None:
            self._emit(counts)
        elif self.tally.counts:  # not yet due (the timer fired early): try again when it is
            loop = asyncio.get_running_loop()
            self.timer, self.timer_loop = loop.call_later(self.tally.wait(self.clock()), self.flush), loop

    def _emit(self, counts: dict[str, int]) -> None:
        token = request_id_var.set(None)  # a summary is of many requests: none's id
        try:
            self.log.info(SUMMARY, extra={"counts": counts, "total": sum(counts.values())})
        finally:
            request_id_var.reset(token)

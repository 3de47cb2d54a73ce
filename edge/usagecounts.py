"""Exact usage counts, the edge's half: every request the edge answers is counted, never sampled, into an
in-memory cell per (account, environment, key, route template, status, error type, minute) holding the
count, the latency sum and a fixed-bucket latency histogram (svckit.usagecounts); a background task sends
the cells to authsvc (AuthService.RecordUsageCounts) every ``FLUSH_INTERVAL`` seconds and once more at a
graceful stop, and authsvc adds them into its minute, hour and day rollups.

On the request path a count is a dict look-up by a tuple of objects the request already holds and a few
integer additions (``edge.gate.Gate.finish`` and ``edge.app.handle_error`` do it inline): no string is
built, no await, no proto. A new cell (the first request of a key, route, status and minute) costs one
list.

What is counted (docs/edge.md "Usage"): every answered request with a route template, status and error
type. A request with an accepted key is counted under its account, environment and key. One refused
before a key was known (no key, a malformed, unknown or revoked one, the wrong host, no such route) has
no account: it is counted with an empty account and key, its environment when its host names one, and
the route template it matched ("" when none), for operators (``svcctl usage --anonymous``); partners
never see those. A path is never counted as such: only route templates, so cells are bounded by keys x
routes x statuses, not by what a client sends.

Loss bound: a batch is applied once (its batch id) and a batch authsvc did not take is kept and sent
again, so nothing is counted twice and nothing is lost while the edge runs. An edge killed (SIGKILL,
power loss) loses what it counted since its last flush that authsvc took: at most ``FLUSH_INTERVAL``
seconds of its requests, more only if authsvc was unreachable then (the cells waiting are bounded by
``MAX_PENDING_CELLS``; beyond it the oldest are dropped and counted in
``edge_usage_cells_dropped_total``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import uuid
from bisect import bisect_left
from collections import deque
from typing import Any

from edge.flusher import stop_then_flush
from edge.metrics import USAGE_CELLS_DROPPED, USAGE_CELLS_SENT, route_template
from svckit.clients import AuthClient
from svckit.prototables import AUTH_ENVIRONMENT
from svckit.usagecounts import BUCKETS, LATENCY_BOUNDS_S
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

# Seconds between flushes: the most a killed edge loses (the module's "Loss bound"). The one place it is
# stated; EdgeConfig.usage_flush_interval (--usage-flush-interval) overrides it.
FLUSH_INTERVAL = 10.0
# Cells in one RecordUsageCounts call (authsvc takes at most 5000).
BATCH = 2000
# Cells kept waiting while authsvc does not take them (about 300 bytes each).
MAX_PENDING_CELLS = 200_000
# The longest route name sent (authsvc keeps 120 characters).
MAX_ROUTE = 120
# The deadline of the last flush at a graceful stop, seconds.
FINAL_FLUSH_TIMEOUT = 3.0

# A cell's key: (account id, environment word, key id, method, route, status, error type, minute). The
# route is the Sanic route's path or a product route's template, as the request holds it (the name
# "GET /v1/hotels/{hotel_id}" is made at the flush, not per request).
CellKey = tuple[str, str, str, str, str, int, str, int]
# A cell: [count, latency sum in seconds, bucket 0 .. bucket BUCKETS-1].
Cell = list[Any]

_DROPPED = USAGE_CELLS_DROPPED.labels("pending_full")
_UNSENT = USAGE_CELLS_DROPPED.labels("shutdown")


# The methods a refusal is counted under as sent; any other is counted as "OTHER" (a client may send any
# token as a method: each would be a cell of its own).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_word(method: str) -> str:
    """Pure: ``method`` when it is a known one, else ``OTHER``."""
    return method if method in METHODS else "OTHER"


def new_cell() -> Cell:
    return [0, 0.0, *([0] * BUCKETS)]


class UsageCounter:
    """The cells of the current interval (``cells``) and the batches waiting for authsvc."""

    __slots__ = ("_failing", "_seq", "_task", "auth", "batch", "cells", "interval", "origin", "pending")

    def __init__(
        self, auth: AuthClient | None, *, interval: float = FLUSH_INTERVAL, batch: int = BATCH
    ) -> None:
        self.auth = auth
        self.interval = interval
        self.batch = batch
        self.cells: dict[CellKey, Cell] = {}
        # Batches built and not yet taken by authsvc, oldest first: (batch id, request).
        self.pending: deque[tuple[str, pb.RecordUsageCountsRequest]] = deque()
        # Batch ids: this process's own prefix (pid and a random part), then a sequence number.
        self.origin = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._seq = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def count(
        self,
        account_id: str,
        environment: str,
        key_id: str,
        method: str,
        route: str,
        status: int,
        error_type: str,
        started: float,
        latency: float,
    ) -> None:
        """Count one answered request (``started``: unix seconds; ``latency``: seconds). Gate.finish does
        the same inline."""
        key = (account_id, environment, key_id, method, route, status, error_type, int(started) // 60)
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = new_cell()
        cell[0] += 1
        cell[1] += latency
        cell[2 + bisect_left(LATENCY_BOUNDS_S, latency)] += 1

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="usage-counts-flush")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.flush()
            except Exception:  # never expected: a flush must not end the flusher
                log.exception("usage counts: flush failed; will retry")

    def take(self) -> int:
        """Move the current cells into pending batches (the request path starts a new dict); returns the
        cells taken. Beyond MAX_PENDING_CELLS the oldest batches are dropped, counted."""
        cells, self.cells = self.cells, {}
        if not cells:
            return 0
        items = list(cells.items())
        for start in range(0, len(items), self.batch):
            batch_id = f"{self.origin}:{next(self._seq)}"
            request = pb.RecordUsageCountsRequest(batch_id=batch_id)
            for key, cell in items[start : start + self.batch]:
                add_count(request, key, cell)
            self.pending.append((batch_id, request))
        waiting = sum(len(r.counts) for _, r in self.pending)
        while waiting > MAX_PENDING_CELLS and len(self.pending) > 1:
            _, dropped = self.pending.popleft()
            waiting -= len(dropped.counts)
            _DROPPED.inc(len(dropped.counts))
        return len(items)

    async def flush(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 (the RPC's deadline)
        """Take the current cells and send every pending batch, oldest first; False when authsvc did not
        take one (it and those after it stay pending, sent again with the same batch id)."""
        self.take()
        while self.pending:
            _, request = self.pending[0]
            if self.auth is None:
                return False
            try:
                await self.auth.record_usage_counts(request, timeout=timeout)
            except Exception as exc:
                if not self._failing:
                    self._failing = True
                    log.warning(
                        "usage counts: authsvc did not take a batch; kept, retried",
                        extra={"error": type(exc).__name__, "batches": len(self.pending)},
                    )
                return False
            self.pending.popleft()
            USAGE_CELLS_SENT.inc(len(request.counts))
            if self._failing:
                self._failing = False
                log.info("usage counts: authsvc takes batches again")
        return True

    async def stop(self) -> None:
        """Stop the flusher and send what is left once, within FINAL_FLUSH_TIMEOUT."""
        task, self._task = self._task, None
        sent = await stop_then_flush(task, self.flush, FINAL_FLUSH_TIMEOUT)
        if not sent:
            left = sum(len(r.counts) for _, r in self.pending)
            if left:
                _UNSENT.inc(left)
                log.warning("usage counts: cells left unsent at shutdown", extra={"count": left})
            self.pending.clear()


def route_name(method: str, route: str) -> str:
    """``GET /v1/hotels/{hotel_id}``; "" for no route."""
    return f"{method} {route_template(route)}"[:MAX_ROUTE] if route else ""


def add_count(request: pb.RecordUsageCountsRequest, key: CellKey, cell: Cell) -> None:
    account_id, environment, key_id, method, route, status, error_type, minute = key
    out = request.counts.add(
        account_id=account_id,
        environment=_environment(environment),
        key_id=key_id,
        route=route_name(method, route),
        status=status,
        error_type=error_type,
        count=cell[0],
        latency_sum_ms=max(0, round(cell[1] * 1000)),
        latency_buckets=cell[2:],
    )
    out.period_start.seconds = minute * 60


def _environment(word: str) -> Any:
    if not word:
        return pb.ENVIRONMENT_UNSPECIFIED
    try:
        return AUTH_ENVIRONMENT.pb(word)
    except ValueError:
        return pb.ENVIRONMENT_UNSPECIFIED

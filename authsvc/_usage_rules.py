"""Usage counts' rules (pure): which rollup a query reads, the periods a minute falls in, and what is
pruned when.

Every flush from an edge is written into all three rollups at once (minute, hour, day: three upserts per
cell in one transaction), so each is complete on its own and none is derived later from another: a
query reads exactly one. The coarsest one that can answer is read (fewest rows): its period must divide
the range's ends and the time grouping asked for, and its retention must still cover the range's start.
A range that no rollup can answer is refused with the parameter named, never answered from a part.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum


class Grain(IntEnum):
    """A rollup's period, in seconds."""

    MINUTE = 60
    HOUR = 3600
    DAY = 86400


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each rollup is kept (authsvc settings; docs/operations.md "Usage counts")."""

    minute: dt.timedelta = dt.timedelta(hours=48)
    hour: dt.timedelta = dt.timedelta(days=90)
    day: dt.timedelta = dt.timedelta(days=730)

    def of(self, grain: Grain) -> dt.timedelta:
        return {Grain.MINUTE: self.minute, Grain.HOUR: self.hour, Grain.DAY: self.day}[grain]


RETENTION = Retention()
# The longest range one query may ask for.
MAX_RANGE = dt.timedelta(days=731)
# Cells in one RecordUsageCounts call.
MAX_CELLS = 5000
# Seconds between prunes of rows past their retention (authsvc.UsagePrune), and of applied batch ids.
PRUNE_INTERVAL = 3600.0
# Applied batch ids are kept this long: a batch retried later than that would be counted again (an edge
# retries for as long as it runs, but never a batch older than its own buffer bound, minutes).
BATCH_ID_RETENTION = dt.timedelta(hours=48)


@dataclass(frozen=True, slots=True)
class UsageCell:
    """Requests counted with the same account, environment, key, route, status and error type in one
    period; in a query's answer, a group (the dimensions not grouped by are empty, 0, or period -1)."""

    account_id: str
    environment: str
    key_id: str
    route: str
    status: int
    error_type: str
    period: int
    count: int
    latency_sum_ms: int
    buckets: tuple[int, ...]


# The dimensions a query may group by (besides a time grain), as the rollups' column names.
DIMENSIONS = ("key_id", "route", "status", "error_type", "environment")


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """What one read of an account's counts asks (Repository.query_usage_counts): cells in [start, end)
    of the ``grain`` rollup, summed per ``group`` (DIMENSIONS) and per ``time_group`` period (None: over
    the whole range); only ``environment``, ``key_id`` or ``status`` when set (None, "", 0: all); NotFound
    for an unknown account when ``must_exist``."""

    account_id: str
    environment: str | None
    start: dt.datetime
    end: dt.datetime
    grain: Grain
    group: Sequence[str]
    time_group: Grain | None
    key_id: str = ""
    status: int = 0
    must_exist: bool = True


def period_start(unix_seconds: int, grain: Grain) -> int:
    """The start (unix seconds, UTC) of the ``grain`` period holding ``unix_seconds``."""
    return unix_seconds - unix_seconds % grain


def _aligned(moment: dt.datetime, grain: Grain) -> bool:
    return int(moment.timestamp()) == moment.timestamp() and int(moment.timestamp()) % grain == 0


def rollup_for(
    start: dt.datetime,
    end: dt.datetime,
    group: Grain | None,
    now: dt.datetime,
    retention: Retention = RETENTION,
) -> Grain:
    """The rollup that answers [start, end) grouped by ``group`` (a time grouping, or None): the coarsest
    whose period divides both ends and the grouping, and whose retention covers ``start`` (a period
    starting before ``now - retention`` may already be pruned). ValueError naming the parameter
    otherwise."""
    if end <= start:
        raise ValueError("to: must be after from")
    if end - start > MAX_RANGE:
        raise ValueError(f"to: a range of at most {MAX_RANGE.days} days")
    finest_reason = ""
    for grain in (Grain.DAY, Grain.HOUR, Grain.MINUTE):
        if group is not None and grain > group:
            continue
        if not (_aligned(start, grain) and _aligned(end, grain)):
            finest_reason = f"from, to: on whole {grain.name.lower()}s (UTC)"
            continue
        if start < now - retention.of(grain):
            finest_reason = (
                f"from: {grain.name.lower()} counts are kept {_words(retention.of(grain))}; "
                "ask for a later start or a coarser grouping"
            )
            continue
        return grain
    raise ValueError(finest_reason or "from, to: on whole minutes (UTC)")


def _words(span: dt.timedelta) -> str:
    if span % dt.timedelta(days=1):
        return f"{span // dt.timedelta(hours=1)} hours"
    return f"{span.days} days"


def cutoffs(now: dt.datetime, retention: Retention = RETENTION) -> dict[Grain, int]:
    """Per rollup, the period start (unix seconds) before which its rows are pruned: the rows whose whole
    period ended before ``now - retention``."""
    out: dict[Grain, int] = {}
    for grain in Grain:
        edge = int((now - retention.of(grain)).timestamp())
        out[grain] = period_start(edge, grain)
    return out

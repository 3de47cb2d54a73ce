"""The usage-count rollups' tables (revision 0009), on authsvc's one MetaData: one table per period
(minute, hour, day) with the same columns, and the batch ids already applied.

A row is one cell: requests of one account, environment, key, route template, status and error type in
one period, with their count, latency sum and histogram (svckit.usagecounts: ``lat_0`` ..
``lat_11``). The primary key leads with the account and the period, the order every query reads in
(one account, a range of periods); pruning reads the period index. Sized for 1,000 accounts x 10 keys x
40 routes: a day's cells of one account are at most keys x routes x statuses rows, read by one index
range (docs/operations.md "Usage counts").
"""

from __future__ import annotations

import sqlalchemy as sa

from authsvc._sql_tables import metadata
from authsvc._usage_rules import Grain
from svckit.usagecounts import BUCKETS

# The longest route template and error type kept (longer ones are cut by the RPC).
MAX_ROUTE = 120
MAX_ERROR_TYPE = 64
MAX_BATCH_ID = 80

# The histogram's columns, in bucket order.
LATENCY_COLUMNS = tuple(f"lat_{i}" for i in range(BUCKETS))
# The columns that identify a cell (after the account and the period).
CELL_COLUMNS = ("environment", "key_id", "route", "status", "error_type")
# The columns that add up.
SUM_COLUMNS = ("count", "latency_sum_ms", *LATENCY_COLUMNS)


def _rollup(name: str) -> sa.Table:
    return sa.Table(
        name,
        metadata,
        sa.Column("account_id", sa.String(40), primary_key=True),
        # The period's start, unix seconds (UTC).
        sa.Column("period", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("environment", sa.String(8), primary_key=True),
        sa.Column("key_id", sa.String(40), primary_key=True),
        sa.Column("route", sa.String(MAX_ROUTE), primary_key=True),
        sa.Column("status", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("error_type", sa.String(MAX_ERROR_TYPE), primary_key=True),
        sa.Column("count", sa.BigInteger, nullable=False),
        sa.Column("latency_sum_ms", sa.BigInteger, nullable=False),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in LATENCY_COLUMNS),
        sa.Index(f"{name}_period", "period"),
        # SQLite: the rows stored in primary-key order (no rowid table beside the key's index), so one
        # account's range of periods is read in one pass, without a look-up per row.
        sqlite_with_rowid=False,
    )


usage_minute = _rollup("auth_usage_minute")
usage_hour = _rollup("auth_usage_hour")
usage_day = _rollup("auth_usage_day")
ROLLUPS = {Grain.MINUTE: usage_minute, Grain.HOUR: usage_hour, Grain.DAY: usage_day}

# Batch ids applied (RecordUsageCounts): a batch sent again is skipped.
usage_batches = sa.Table(
    "auth_usage_batches",
    metadata,
    sa.Column("batch_id", sa.String(MAX_BATCH_ID), primary_key=True),
    sa.Column("applied_at", sa.Float, nullable=False),
    sa.Index("auth_usage_batches_time", "applied_at"),
)

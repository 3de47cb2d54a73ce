#!/usr/bin/env python3
"""Fill authsvc's usage-count rollups (revision 0009) with synthetic counts, for benchmarks (not a test).

Day rollups for ``--accounts`` x ``--keys`` x ``--routes`` x ``--days`` (default 1,000 x 10 x 40 x 90:
36 million rows), each cell a 200 with a share of errors on a few routes (a 403, a 404 and a 429 cell per
key and day on three of its routes); hour rollups for the last ``--recent-hours`` (48) and minute
rollups for the last ``--recent-minutes`` (60) of the first ``--recent-accounts`` (100) accounts, the
window the Insights pages read at that grain. Account ids are ``acct_gen<n>``; ``--account ID`` makes the
first one a real account (the bench's, created over gRPC) and ``--key ID`` its first key.

With ``--webhookd-database URL`` (webhookd's database, migrated) it also fills webhookd's delivery counts
(``wh_delivery_counts``, revision 0015, what the Insights webhook page reads): for every account
``--endpoints`` (5) endpoints x day rows for ``--days`` and hour rows for ``--recent-hours``, each period a
``succeeded`` row and, on some endpoints, ``http_error`` and ``timeout`` rows. ``--endpoint ID`` (repeatable)
names the first account's endpoints (real ones, in ``--endpoint-environment``, sandbox by default).

The database must be migrated (``python -m authsvc migrate --database URL``). Rows go in by the drivers'
bulk paths (SQLite: one ``executemany`` per chunk in one transaction; PostgreSQL: ``COPY``), in
primary-key order.

Usage: ``.venv/bin/python scripts/gen_usage_rollups.py --database sqlite+aiosqlite:///var/a.db``
(or ``postgresql+asyncpg://...``); prints the rows written per table and the time taken.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import pathlib
import sqlite3
import sys
import time
from collections.abc import Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# 40 route templates, as the edge names them.
ROUTE_WORDS = ("hotels", "flights", "esim", "webhooks")
BUCKETS = 12
CHUNK = 50_000


def routes(n: int) -> list[str]:
    out = []
    for i in range(n):
        family = ROUTE_WORDS[i % len(ROUTE_WORDS)]
        out.append(f"{'GET' if i % 3 else 'POST'} /v1/{family}/r{i:02d}/{{id}}")
    return sorted(out)


def cells(
    accounts: list[str], keys: int, route_names: list[str], periods: list[int], first_key: str
) -> Iterator[tuple[Any, ...]]:
    """Rows in primary-key order: account, period, environment, key, route, status, error type, sums."""
    errors = {0: (403, "missing_scope"), 1: (404, "not_found"), 2: (429, "rate_limited")}
    for a, account in enumerate(accounts):
        key_ids = sorted(
            [
                first_key if (a == 0 and k == 0 and first_key) else f"key_gen{a:04d}x{k:02d}"
                for k in range(keys)
            ]
        )
        for period in periods:
            for k, key_id in enumerate(key_ids):
                env = "live" if k % 2 == 0 else "sandbox"
                for r, route in enumerate(route_names):
                    count = 20 + (a * 7 + k * 3 + r + period // 3600) % 80
                    fast, slow = count - count // 10, count // 10
                    hist = [0] * BUCKETS
                    hist[2], hist[5] = fast, slow
                    rows = [(200, "", count, fast * 20 + slow * 200, hist)]
                    if r in errors:
                        status, etype = errors[r]
                        err = [0] * BUCKETS
                        err[0] = 3
                        rows.append((status, etype, 3, 6, err))
                    for status, etype, n, total_ms, h in sorted(rows):
                        yield (account, period, env, key_id, route, status, etype, n, total_ms, *h)


COLUMNS = (
    "account_id, period, environment, key_id, route, status, error_type, count, latency_sum_ms, "
    + ", ".join(f"lat_{i}" for i in range(BUCKETS))
)


WH_COLUMNS = (
    "account_id, environment, grain, period, endpoint_id, outcome, count, latency_sum_ms, "
    + ", ".join(f"lat_{i}" for i in range(BUCKETS))
)


def delivery_cells(
    accounts: list[str], endpoints: int, grain: int, spans: list[int], first: list[str], first_env: str
) -> Iterator[tuple[Any, ...]]:
    """wh_delivery_counts rows in primary-key order: account, environment, grain, period, endpoint,
    outcome, sums."""
    for a, account in enumerate(accounts):
        if a == 0 and first:
            owned = [(first_env, e) for e in first]
        else:
            owned = [
                ("live" if e % 2 == 0 else "sandbox", f"ep_gen{a:04d}x{e:02d}") for e in range(endpoints)
            ]
        by_env: dict[str, list[str]] = {}
        for env, endpoint in owned:
            by_env.setdefault(env, []).append(endpoint)
        for env in sorted(by_env):
            for period in spans:
                for e, endpoint in enumerate(sorted(by_env[env])):
                    ok = 10 + (a * 7 + e * 3 + period // grain) % 50
                    hist = [0] * BUCKETS
                    hist[3], hist[6] = ok - ok // 10, ok // 10
                    rows = [("succeeded", ok, (ok - ok // 10) * 40 + (ok // 10) * 400, hist)]
                    if e % 2 == 0:
                        err = [0] * BUCKETS
                        err[4] = 2
                        rows.append(("http_error", 2, 160, err))
                    if e % 3 == 0:
                        slow = [0] * BUCKETS
                        slow[BUCKETS - 1] = 1
                        rows.append(("timeout", 1, 10_000, slow))
                    for outcome, n, total_ms, h in sorted(rows):
                        yield (account, env, grain, period, endpoint, outcome, n, total_ms, *h)


def fill_sqlite(path: str, table: str, rows: Iterator[tuple[Any, ...]], columns: str = COLUMNS) -> int:
    marks = ", ".join("?" for _ in columns.split(","))
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    written = 0
    try:
        with db:
            chunk: list[tuple[Any, ...]] = []
            for row in rows:
                chunk.append(row)
                if len(chunk) >= CHUNK:
                    db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", chunk)
                    written += len(chunk)
                    chunk = []
            if chunk:
                db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", chunk)
                written += len(chunk)
        db.execute("ANALYZE")
    finally:
        db.close()
    return written


async def fill_postgres(
    dsn: str,
    settings: dict[str, str],
    table: str,
    rows: Iterator[tuple[Any, ...]],
    column_list: str = COLUMNS,
) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn, server_settings=settings)
    written = 0
    try:
        columns = [c.strip() for c in column_list.split(",")]
        chunk: list[tuple[Any, ...]] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) >= CHUNK:
                await conn.copy_records_to_table(table, records=chunk, columns=columns)
                written += len(chunk)
                chunk = []
        if chunk:
            await conn.copy_records_to_table(table, records=chunk, columns=columns)
            written += len(chunk)
        # VACUUM too: a freshly loaded table's visibility map is empty, and autovacuum would otherwise
        # scan it (gigabytes) while the benchmark measures.
        await conn.execute(f"VACUUM (ANALYZE) {table}")
    finally:
        await conn.close()
    return written


def periods(now: dt.datetime, grain: int, count: int) -> list[int]:
    last = int(now.timestamp()) // grain * grain
    return [last - i * grain for i in range(count - 1, -1, -1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="an authsvc database URL, migrated")
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--routes", type=int, default=40)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--recent-accounts", type=int, default=100)
    parser.add_argument("--recent-hours", type=int, default=48)
    parser.add_argument("--recent-minutes", type=int, default=60)
    parser.add_argument("--account", default="", help="the first account's id (a real account)")
    parser.add_argument("--key", default="", help="the first account's first key id (a real key)")
    parser.add_argument("--webhookd-database", default="", help="webhookd's database URL, migrated")
    parser.add_argument("--endpoints", type=int, default=5, help="endpoints per account")
    parser.add_argument(
        "--endpoint", action="append", default=[], help="the first account's endpoint ids (real ones)"
    )
    parser.add_argument("--endpoint-environment", default="sandbox", choices=["live", "sandbox"])
    args = parser.parse_args()

    from svckit.db import asyncpg_dsn, normalize_url

    now = dt.datetime.now(dt.UTC)
    accounts = [args.account or "acct_gen0000", *(f"acct_gen{i:04d}" for i in range(1, args.accounts))]
    accounts = [accounts[0], *sorted(accounts[1:])]
    route_names = routes(args.routes)
    recent = accounts[: args.recent_accounts]
    plan: list[tuple[str, str, list[str], list[int], Iterator[tuple[Any, ...]], str]] = []
    for table, who, spans in [
        ("auth_usage_day", accounts, periods(now, 86400, args.days)),
        ("auth_usage_hour", recent, periods(now, 3600, args.recent_hours)),
        ("auth_usage_minute", recent, periods(now, 60, args.recent_minutes)),
    ]:
        rows = cells(who, args.keys, route_names, spans, args.key)
        plan.append((args.database, table, who, spans, rows, COLUMNS))
    if args.webhookd_database:
        for grain, spans in [
            (86400, periods(now, 86400, args.days)),
            (3600, periods(now, 3600, args.recent_hours)),
        ]:
            rows = delivery_cells(
                accounts, args.endpoints, grain, spans, args.endpoint, args.endpoint_environment
            )
            plan.append((args.webhookd_database, "wh_delivery_counts", accounts, spans, rows, WH_COLUMNS))
    for url, table, who, spans, rows, columns in plan:
        started = time.perf_counter()
        if url.startswith("sqlite"):
            written = fill_sqlite(url.split("///", 1)[1], table, rows, columns)
        else:
            dsn, settings = asyncpg_dsn(normalize_url(url))
            written = asyncio.run(fill_postgres(dsn, settings, table, rows, columns))
        took = time.perf_counter() - started
        print(
            f"{table:<18} {written:>12,} rows  {len(who):>5} accounts x {len(spans)} periods  {took:7.1f} s"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark of GET /v1/usage for one account over full rollups (not a test), on SQLite and PostgreSQL.

For each database: authsvc is migrated and started as a process, one account and key are made over gRPC,
``scripts/gen_usage_rollups.py`` fills the rollups (default 1,000 accounts x 10 keys x 40 routes x 90
days of day rollups, the first account being the bench's; hour and minute rollups for the recent
window), an edge starts on that authsvc, and one client sends each query below ``--requests`` times in
turn, sequentially, printing p50/p95/max of the client's time. The baseline in the same run: GET
/v1/account with the same key on the same edge (authentication and the edge's own work, no rollup read).
Goal: p95 < 200 ms for every query.

Usage: ``.venv/bin/python scripts/bench_usage.py [--accounts 1000] [--requests 40] [--only sqlite|postgres]``
(PostgreSQL: database ``test`` on 127.0.0.1:5432, a schema of its own, dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import pathlib
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG_BASE = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def queries(today: dt.date) -> list[tuple[str, dict[str, str]]]:
    d = dt.timedelta
    return [
        ("today, totals (default)", {}),
        ("today, key x route x status", {"groupBy": "key,route,status"}),
        ("today by hour x status", {"groupBy": "hour,status"}),
        ("30 days by day", {"from": str(today - d(days=29)), "groupBy": "day"}),
        ("30 days, key x status x day", {"from": str(today - d(days=29)), "groupBy": "key,status,day"}),
        ("90 days, route x errorType", {"from": str(today - d(days=89)), "groupBy": "route,errorType"}),
    ]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def account_and_key(target: str) -> tuple[str, str, str]:
    import grpc

    from travel.auth.v1 import auth_pb2 as pb
    from travel.auth.v1 import auth_pb2_grpc

    actor = pb.Actor(user="bench@example.com")
    async with grpc.aio.insecure_channel(target) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        acct = (
            await stub.CreateAccount(
                pb.CreateAccountRequest(name="Bench", mode=pb.ACCOUNT_MODE_A, actor=actor)
            )
        ).account.id
        key = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=acct,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="bench",
                scopes=["account:read"],
                actor=actor,
            )
        )
        return acct, key.key.id, key.secret


def run_one(name: str, url: str, args: argparse.Namespace, tmp: pathlib.Path) -> None:
    import httpx

    from edge.testing import SANDBOX_HOST, edge_args
    from tests.support import ServiceProcess, sqlite_url

    print(
        f"\n== {name}: {args.accounts} accounts x {args.keys} keys x {args.routes} routes x {args.days} days"
    )
    sys.stdout.flush()
    subprocess.run(
        [sys.executable, "-m", "authsvc", "migrate", "--database", url], check=True, capture_output=True
    )
    procs: list[ServiceProcess] = []
    try:
        auth = ServiceProcess(
            "authsvc", ["--listen", "127.0.0.1:0", "--metrics-listen", "", "--database", url]
        ).start(tmp / f"{name}-authsvc.log")
        procs.append(auth)
        acct, key_id, secret = asyncio.run(account_and_key(auth.grpc_target))
        gen = [
            sys.executable, str(ROOT / "scripts" / "gen_usage_rollups.py"), "--database", url,
            "--accounts", str(args.accounts), "--keys", str(args.keys), "--routes", str(args.routes),
            "--days", str(args.days), "--account", acct, "--key", key_id,
        ]  # fmt: skip
        subprocess.run(gen, check=True)
        edge = ServiceProcess(
            "edge",
            [
                *edge_args(auth.grpc_target, "127.0.0.1:1", sqlite_url(tmp, f"{name}-edge.db")),
                "--rate-limit-sandbox",
                "0",
            ],
        ).start(tmp / f"{name}-edge.log")
        procs.append(edge)
        base = f"http://127.0.0.1:{edge.ports['sandbox_port']}"
        headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"}
        today = dt.datetime.now(dt.UTC).date()
        print(f"{'query':<32} {'rows':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        with httpx.Client(timeout=30) as http:
            cases: list[tuple[str, str, dict[str, str]]] = [("baseline: GET /v1/account", "/v1/account", {})]
            cases += [(label, "/v1/usage", params) for label, params in queries(today)]
            for label, path, params in cases:
                http.get(base + path, params=params, headers=headers)  # warm-up
                times, rows = [], 0
                for _ in range(args.requests):
                    t0 = time.perf_counter()
                    resp = http.get(base + path, params=params, headers=headers)
                    times.append((time.perf_counter() - t0) * 1000)
                    if resp.status_code != 200:
                        raise SystemExit(f"{label}: {resp.status_code} {resp.text}")
                    rows = len(resp.json().get("data", [])) if path == "/v1/usage" else 1
                print(f"{label:<32} {rows:>6} {pct(times, 50):8.1f} {pct(times, 95):8.1f} {max(times):8.1f}")
                sys.stdout.flush()
    finally:
        for proc in reversed(procs):
            proc.terminate()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--routes", type=int, default=40)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--requests", type=int, default=40, help="requests per query")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_usage_"))
    if args.only in (None, "sqlite"):
        run_one("sqlite", f"sqlite+aiosqlite:///{tmp / 'a.db'}", args, tmp)
        (tmp / "a.db").unlink(missing_ok=True)
    if args.only in (None, "postgres"):
        import asyncpg

        schema = f"bench_usage_{uuid.uuid4().hex[:8]}"

        async def schema_sql(sql: str) -> None:
            conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test")
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        asyncio.run(schema_sql(f'CREATE SCHEMA "{schema}"'))
        try:
            run_one("postgres", f"{PG_BASE}?search_path={schema}", args, tmp)
        finally:
            asyncio.run(schema_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    return 0


if __name__ == "__main__":
    sys.exit(main())

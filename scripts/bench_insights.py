#!/usr/bin/env python3
"""Benchmark of the portal's Insights pages and GET /v1/usage for one account over full rollups (not a
test), on SQLite and PostgreSQL.

For each database: authsvc and webhookd are migrated and started as processes; one account, its owner (a
portal user, signed in by accepting an invite, as ``scripts/bench_portal.py`` does), a sandbox key with
``account:read`` and ``--endpoints`` sandbox webhook endpoints are made over gRPC; then
``scripts/gen_usage_rollups.py`` fills authsvc's usage rollups (default 1,000 accounts x 10 keys x 40
routes x 90 days of day rows, the first account being the bench's; hour and minute rows for the recent
window) and webhookd's delivery counts (the same accounts, 5 endpoints each, 90 days; the bench's
account's rows on its real endpoints). A portal and an edge start on those services, and one client
fetches each page (and each ``GET /v1/usage`` query of ``scripts/bench_usage.py``) ``--requests`` times in
turn, sequentially, after a warm-up, printing p50/p95/max of the client's time (loopback HTTP included).

Baselines in the same run: the portal's ``/healthz`` (no service call) and its overview page
``/sandbox/`` for the same signed-in user (what a portal page costs without reading the rollups), and the
edge's ``GET /v1/account`` with the same key. Goal: p95 < 200 ms for every Insights page and query.

Usage: ``.venv/bin/python scripts/bench_insights.py [--accounts 1000] [--requests 40]
[--only sqlite|postgres]`` (PostgreSQL: database ``test`` on 127.0.0.1:5432, two schemas of its own,
authsvc's and webhookd's, dropped afterwards).
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
sys.path.insert(0, str(ROOT / "scripts"))

from bench_usage import pct, queries  # noqa: E402

PG_BASE = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
PASSWORD = "benchmark passphrase"
PAGES = [
    ("Insights: traffic (24 h by hour)", "/sandbox/insights"),
    ("Insights: errors (7 days)", "/sandbox/insights/errors"),
    ("Insights: keys (7 days)", "/sandbox/insights/keys"),
    ("Insights: searches, look-to-book", "/sandbox/insights/searches"),
    ("Insights: webhooks (7 days)", "/sandbox/insights/webhooks"),
]


def seed(auth_target: str, hooks_target: str, endpoints: int) -> tuple[str, str, str, str, list[str]]:
    """The bench's account: (account id, portal session token, key id, key secret, endpoint ids)."""
    import grpc

    from travel.auth.v1 import auth_pb2 as apb
    from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
    from travel.auth.v1 import identity_pb2 as ipb
    from travel.webhooks.v1 import webhooks_pb2 as wpb
    from travel.webhooks.v1 import webhooks_pb2_grpc

    with grpc.insecure_channel(auth_target) as a, grpc.insecure_channel(hooks_target) as w:
        auth = auth_pb2_grpc.AuthServiceStub(a)
        ids = identity_pb2_grpc.IdentityServiceStub(a)
        hooks = webhooks_pb2_grpc.WebhookServiceStub(w)
        ops = apb.Actor(user="ops:bench")
        account = auth.CreateAccount(
            apb.CreateAccountRequest(name="Bench", mode=apb.ACCOUNT_MODE_A, actor=ops)
        ).account.id
        invite = ids.CreateInvite(
            ipb.CreateInviteRequest(
                account_id=account, email="o@bench.example", role=ipb.USER_ROLE_OWNER, actor=ops
            )
        )
        session = ids.AcceptInvite(
            ipb.AcceptInviteRequest(token=invite.token, password=PASSWORD)
        ).session_token
        key = auth.CreateKey(
            apb.CreateKeyRequest(
                account_id=account,
                environment=apb.ENVIRONMENT_SANDBOX,
                name="bench",
                scopes=["account:read"],
                actor=ops,
            )
        )
        endpoint_ids = [
            hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=account,
                    environment=wpb.ENVIRONMENT_SANDBOX,
                    url=f"http://127.0.0.1:9/bench/{i}",
                    events=["booking.confirmed"],
                )
            ).endpoint.id
            for i in range(endpoints)
        ]
        return account, session, key.key.id, key.secret, endpoint_ids


def measure(label: str, fetch: object, requests: int) -> tuple[str, int, float, float, float]:
    """``fetch()`` -> (status, rows); once to warm up, then ``requests`` times timed."""
    assert callable(fetch)
    fetch()
    times: list[float] = []
    rows = 0
    for _ in range(requests):
        t0 = time.perf_counter()
        status, rows = fetch()
        times.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise SystemExit(f"{label}: HTTP {status}")
    return label, rows, pct(times, 50), pct(times, 95), max(times)


def run_one(name: str, auth_url: str, hooks_url: str, args: argparse.Namespace, tmp: pathlib.Path) -> None:
    import httpx

    from edge.testing import SANDBOX_HOST, edge_args
    from tests.support import ServiceProcess, sqlite_url

    print(
        f"\n== {name}: {args.accounts} accounts x {args.keys} keys x {args.routes} routes x {args.days} days"
    )
    sys.stdout.flush()
    for module, url in (("authsvc", auth_url), ("webhookd", hooks_url)):
        subprocess.run(
            [sys.executable, "-m", module, "migrate", "--database", url], check=True, capture_output=True
        )
    procs: list[ServiceProcess] = []
    try:
        auth = ServiceProcess(
            "authsvc", ["--listen", "127.0.0.1:0", "--metrics-listen", "", "--database", auth_url]
        ).start(tmp / f"{name}-authsvc.log")
        procs.append(auth)
        hooks = ServiceProcess(
            "webhookd",
            [
                "--listen", "127.0.0.1:0", "--metrics-listen", "", "--database", hooks_url,
                "--allow-private-targets", "--allow-http",
            ],
        ).start(tmp / f"{name}-webhookd.log")  # fmt: skip
        procs.append(hooks)
        account, session, key_id, secret, endpoint_ids = seed(
            auth.grpc_target, hooks.grpc_target, args.endpoints
        )
        gen = [
            sys.executable, str(ROOT / "scripts" / "gen_usage_rollups.py"), "--database", auth_url,
            "--accounts", str(args.accounts), "--keys", str(args.keys), "--routes", str(args.routes),
            "--days", str(args.days), "--account", account, "--key", key_id,
            "--webhookd-database", hooks_url, *(f"--endpoint={e}" for e in endpoint_ids),
        ]  # fmt: skip
        subprocess.run(gen, check=True)
        portal = ServiceProcess(
            "portal",
            [
                "--listen", "127.0.0.1:0", "--metrics-listen", "", "--log-level", "WARNING",
                "--authsvc", auth.grpc_target, "--webhookd", hooks.grpc_target,
            ],
        ).start(tmp / f"{name}-portal.log")  # fmt: skip
        procs.append(portal)
        edge = ServiceProcess(
            "edge",
            [
                *edge_args(auth.grpc_target, hooks.grpc_target, sqlite_url(tmp, f"{name}-edge.db")),
                "--rate-limit-sandbox",
                "0",
            ],
        ).start(tmp / f"{name}-edge.log")
        procs.append(edge)
        edge_base = f"http://127.0.0.1:{edge.ports['sandbox_port']}"
        headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"}
        today = dt.datetime.now(dt.UTC).date()
        results = []
        with (
            httpx.Client(
                base_url=portal.ports["url"], cookies={"portal_session": session}, timeout=30
            ) as web,
            httpx.Client(timeout=30) as api,
        ):

            def page(path: str) -> object:
                def fetch() -> tuple[int, int]:
                    resp = web.get(path)
                    return resp.status_code, len(resp.content)

                return fetch

            def usage(path: str, params: dict[str, str]) -> object:
                def fetch() -> tuple[int, int]:
                    resp = api.get(edge_base + path, params=params, headers=headers)
                    rows = len(resp.json().get("data", [])) if path == "/v1/usage" else 1
                    return resp.status_code, rows

                return fetch

            cases: list[tuple[str, object]] = [
                ("baseline: portal /healthz", page("/healthz")),
                ("baseline: portal overview /sandbox/", page("/sandbox/")),
                *((label, page(path)) for label, path in PAGES),
                ("baseline: edge GET /v1/account", usage("/v1/account", {})),
                *((f"/v1/usage {label}", usage("/v1/usage", params)) for label, params in queries(today)),
            ]
            print(f"{'page or query':<44} {'bytes/rows':>10} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
            for label, fetch in cases:
                row = measure(label, fetch, args.requests)
                results.append(row)
                print(f"{row[0]:<44} {row[1]:>10} {row[2]:8.1f} {row[3]:8.1f} {row[4]:8.1f}")
                sys.stdout.flush()
        worst = max((r for r in results if not r[0].startswith("baseline")), key=lambda r: r[3])
        print(f"slowest p95: {worst[0]} {worst[3]:.1f} ms (goal < 200 ms)")
    finally:
        for proc in reversed(procs):
            proc.terminate()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--routes", type=int, default=40)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--endpoints", type=int, default=5, help="the bench account's webhook endpoints")
    parser.add_argument("--requests", type=int, default=40, help="requests per page or query")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument("--tmp", default="", help="a directory for the SQLite files and logs")
    args = parser.parse_args()
    tmp = pathlib.Path(args.tmp or tempfile.mkdtemp(prefix="bench_insights_"))
    tmp.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "sqlite"):
        files = [tmp / "a.db", tmp / "w.db"]
        try:
            run_one("sqlite", f"sqlite+aiosqlite:///{files[0]}", f"sqlite+aiosqlite:///{files[1]}", args, tmp)
        finally:
            for f in files:
                for suffix in ("", "-wal", "-shm"):
                    f.with_name(f.name + suffix).unlink(missing_ok=True)
    if args.only in (None, "postgres"):
        import asyncpg

        tag = uuid.uuid4().hex[:8]
        schemas = [f"bench_insights_a_{tag}", f"bench_insights_w_{tag}"]

        async def schema_sql(sql: str) -> None:
            conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test")
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        for s in schemas:
            asyncio.run(schema_sql(f'CREATE SCHEMA "{s}"'))
        try:
            run_one(
                "postgres",
                f"{PG_BASE}?search_path={schemas[0]}",
                f"{PG_BASE}?search_path={schemas[1]}",
                args,
                tmp,
            )
        finally:
            for s in schemas:
                asyncio.run(schema_sql(f'DROP SCHEMA IF EXISTS "{s}" CASCADE'))
    return 0


if __name__ == "__main__":
    sys.exit(main())

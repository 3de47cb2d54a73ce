"""Exact usage counts end to end, on real processes (authsvc, webhookd, an edge, a product upstream, a
webhook receiver): a scripted mix of requests over 3 keys in 2 environments with at least 6 outcomes
(200, 401, 403 missing_scope, 404, 429, 402 search_quota_exhausted), counted by the test itself as it
gets the answers, equals what GET /v1/usage answers per key x route x status x hour: 0 difference. The
requests no key was accepted for (401) are the operators' (anonymous) counts, compared the same way.
Webhook deliveries likewise: GET /v1/usage/webhooks per endpoint x outcome equals what the receivers
answered.

The mix's size is ``USAGE_MIX_REQUESTS`` (default 1,200 in the suite; docs/operations.md "Usage counts"
records a run of 10,000).
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import os
import pathlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest

from edge.testing import LIVE_HOST, SANDBOX_HOST, Upstream, edge_args, write_route_table
from svcctl.__main__ import main as svcctl
from svckit.protos import timestamp as ts
from tests.support import ServiceProcess, event_data, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd.testing import Receiver

REQUESTS = int(os.environ.get("USAGE_MIX_REQUESTS", "1200"))
# Concurrent clients sending the mix.
CLIENTS = 6
ACTOR = pb.Actor(user="ops@partner.example")
# Live searches each account may make a day: past them, 402.
ALLOWANCE = max(5, REQUESTS // 40)

# Route templates as the counts name them.
ACCOUNT = "GET /v1/account"
SEARCH = "GET /v1/hotels/search"
ENDPOINT = "GET /v1/webhooks/endpoints/{endpoint_id}"

Cell = tuple[str, str, int]  # key id, route, status


@dataclass
class Usage:
    auth: ServiceProcess
    hooks: ServiceProcess
    edge: ServiceProcess
    receiver: Receiver

    def url(self, env: str) -> str:
        return f"http://127.0.0.1:{self.edge.ports[f'{env}_port']}"


@pytest.fixture(scope="module")
def usage_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Usage]:
    tmp = tmp_path_factory.mktemp("usage")
    live_up, sandbox_up = Upstream("live"), Upstream("sandbox")
    routes = write_route_table(tmp / "routes.json", live_up, sandbox_up)
    receiver = Receiver(None, responder=lambda r: 200 if r.path == "/ok" else 500).start()
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        hooks = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"), "--allow-private-targets", "--allow-http"
        )
        procs.append(hooks)
        args = edge_args(auth.grpc_target, hooks.grpc_target, sqlite_url(tmp, "e.db"), routes)
        edge = ServiceProcess("edge", [*args, "--usage-flush-interval", "0.5"]).start(tmp / "edge.log")
        procs.append(edge)
        yield Usage(auth, hooks, edge, receiver)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()
        live_up.close()
        sandbox_up.close()


def hour_of(t: float) -> str:
    return dt.datetime.fromtimestamp(t - t % 3600, dt.UTC).isoformat().replace("+00:00", "Z")


class Tally:
    """What the script got, counted per (key, route, status) and hour. A request sent in one hour and
    answered in the next could be counted in either: it is kept apart (``edge``), and its hour checked
    as "one of the two"."""

    def __init__(self) -> None:
        self.by_hour: collections.Counter[tuple[Cell, str]] = collections.Counter()
        self.edge: list[tuple[Cell, str, str]] = []

    def add(self, cell: Cell, sent: float, answered: float) -> None:
        before, after = hour_of(sent), hour_of(answered)
        if before == after:
            self.by_hour[(cell, before)] += 1
        else:
            self.edge.append((cell, before, after))

    def totals(self) -> collections.Counter[Cell]:
        out: collections.Counter[Cell] = collections.Counter()
        for (cell, _hour), n in self.by_hour.items():
            out[cell] += n
        for cell, _b, _a in self.edge:
            out[cell] += 1
        return out

    def check(self, got: dict[tuple[Cell, str], int]) -> None:
        """0 difference per key x route x status x hour (a request at an hour's edge in one of its two)."""
        left = dict(got)
        for cell, before, after in self.edge:
            for hour in (before, after):
                if left.get((cell, hour), 0) > self.by_hour.get((cell, hour), 0):
                    left[(cell, hour)] -= 1
                    break
            else:
                raise AssertionError(f"{cell} answered at {before}/{after} is not counted")
        assert {k: v for k, v in left.items() if v} == {k: v for k, v in self.by_hour.items() if v}


async def key(
    auth: auth_pb2_grpc.AuthServiceStub, account_id: str, env: str, scopes: list[str]
) -> pb.CreateKeyResponse:
    created: pb.CreateKeyResponse = await auth.CreateKey(
        pb.CreateKeyRequest(
            account_id=account_id,
            environment=pb.ENVIRONMENT_LIVE if env == "live" else pb.ENVIRONMENT_SANDBOX,
            name=f"mix-{env}",
            scopes=scopes,
            actor=ACTOR,
        )
    )
    return created


async def read_usage(http: httpx.AsyncClient, stack: Usage, secret: str, **params: str) -> dict[str, object]:
    resp = await http.get(
        stack.url("sandbox") + "/v1/usage",
        params=params,
        headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"},
    )
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


async def test_a_scripted_mix_is_counted_exactly(usage_stack: Usage) -> None:
    stack = usage_stack
    async with grpc.aio.insecure_channel(stack.auth.grpc_target) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        account = await auth.CreateAccount(
            pb.CreateAccountRequest(
                name="Mix", mode=pb.ACCOUNT_MODE_A, daily_search_allowance=ALLOWANCE, actor=ACTOR
            )
        )
        acct = account.account.id
        full = ["hotels:read", "account:read", "webhooks:read"]
        keys = {
            "live": await key(auth, acct, "live", full),  # 200, 404, 402 past the allowance, 429
            "sandbox": await key(auth, acct, "sandbox", full),  # 200, 404, 429 (25 a second)
            "narrow": await key(auth, acct, "live", ["hotels:read"]),  # 403 missing_scope
        }
        reader = await key(auth, acct, "sandbox", ["account:read"])  # reads the counts; not in the mix

    plan: list[tuple[str, str, str]] = []  # (key name or "bad", env, route)
    rng = random.Random(38)
    for _ in range(REQUESTS):
        name = rng.choice(["live", "live", "sandbox", "sandbox", "narrow", "bad"])
        env = "sandbox" if name == "sandbox" else "live" if name != "bad" else rng.choice(["live", "sandbox"])
        plan.append((name, env, rng.choice([ACCOUNT, SEARCH, SEARCH, ENDPOINT])))
    paths = {ACCOUNT: "/v1/account", SEARCH: "/v1/hotels/search", ENDPOINT: "/v1/webhooks/endpoints/we_nope"}
    tally = Tally()
    anonymous: collections.Counter[tuple[str, str, int]] = collections.Counter()  # env, route, status
    statuses: collections.Counter[int] = collections.Counter()
    queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)

    async def client() -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            while not queue.empty():
                name, env, route = queue.get_nowait()
                secret = (
                    keys[name].secret
                    if name != "bad"
                    else f"svc_{'live' if env == 'live' else 'test'}_{'x' * 40}"
                )
                headers = {
                    "Host": LIVE_HOST if env == "live" else SANDBOX_HOST,
                    "Authorization": f"Svc {secret}",
                }
                if name == "bad":
                    # The edge ends a connection with no accepted key after its first refusal: never
                    # reuse one (a request sent on it as it closes would get no answer).
                    headers["Connection"] = "close"
                sent = time.time()
                resp = await http.get(stack.url(env) + paths[route], headers=headers)
                answered = time.time()
                statuses[resp.status_code] += 1
                if name == "bad":
                    anonymous[(env, route, resp.status_code)] += 1
                else:
                    tally.add((keys[name].key.id, route, resp.status_code), sent, answered)

    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    # The six outcomes are all there.
    assert {200, 401, 402, 403, 404, 429} <= set(statuses), statuses

    expected = tally.totals()
    async with httpx.AsyncClient(timeout=30) as http:
        # The edge flushes every 0.5 s: wait until the counts have every request (never more: checked).
        body: dict[str, object] = {}
        for _ in range(100):
            body = await read_usage(
                http, stack, reader.secret, groupBy="key,route,status,hour", environment="all"
            )
            rows = [r for r in body["data"] if r["key"] != reader.key.id]  # type: ignore[attr-defined]
            if sum(r["count"] for r in rows) >= sum(expected.values()):
                break
            await asyncio.sleep(0.2)
        got = {((r["key"], r["route"], r["status"]), r["hour"]): r["count"] for r in rows}
        tally.check(got)
        # Per key x route x status over the day: the same.
        totals = await read_usage(http, stack, reader.secret, groupBy="key,route,status", environment="all")
        assert {
            (r["key"], r["route"], r["status"]): r["count"]
            for r in totals["data"]  # type: ignore[attr-defined]
            if r["key"] != reader.key.id
        } == dict(expected)
        # CSV: the same rows.
        csv_resp = await http.get(
            stack.url("sandbox") + "/v1/usage",
            params={"groupBy": "key,status", "environment": "all"},
            headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {reader.secret}", "Accept": "text/csv"},
        )
        assert csv_resp.status_code == 200 and csv_resp.headers["content-type"].startswith("text/csv")
        lines = csv_resp.text.strip().split("\r\n")
        assert lines[0] == "key,status,count,latencyP50Ms,latencyP95Ms,latencyP99Ms"
        by_key_status: collections.Counter[tuple[str, int]] = collections.Counter()
        for (key_id, _route, status), n in expected.items():
            by_key_status[(key_id, status)] += n
        csv_rows = {
            (k, int(s)): int(n)
            for k, s, n, *_ in (line.split(",") for line in lines[1:])
            if k != reader.key.id
        }
        assert csv_rows == dict(by_key_status)

    # The requests with no accepted key: the operators' anonymous counts, per environment x route x status.
    async with grpc.aio.insecure_channel(stack.auth.grpc_target) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        query = pb.QueryUsageCountsRequest(
            anonymous=True,
            group_by=[pb.USAGE_GROUP_ENVIRONMENT, pb.USAGE_GROUP_ROUTE, pb.USAGE_GROUP_STATUS],
        )
        getattr(query, "from").CopyFrom(ts(today - dt.timedelta(days=1)))
        query.to.CopyFrom(ts(today + dt.timedelta(days=1)))
        rows = (await auth.QueryUsageCounts(query)).rows
        words = {pb.ENVIRONMENT_LIVE: "live", pb.ENVIRONMENT_SANDBOX: "sandbox"}
        assert {
            (words[r.counts.environment], r.counts.route, r.counts.status): r.counts.count for r in rows
        } == dict(anonymous)


async def test_webhook_deliveries_are_counted_per_endpoint_and_outcome(usage_stack: Usage) -> None:
    stack = usage_stack
    async with grpc.aio.insecure_channel(stack.auth.grpc_target) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        account = await auth.CreateAccount(
            pb.CreateAccountRequest(name="Hooks", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
        )
        acct = account.account.id
        reader = await key(auth, acct, "sandbox", ["account:read"])
    events = max(10, REQUESTS // 50)
    async with grpc.aio.insecure_channel(stack.hooks.grpc_target) as channel:
        hooks = webhooks_pb2_grpc.WebhookServiceStub(channel)
        ids = {}
        for path in ("/ok", "/bad"):
            reg = await hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=acct,
                    environment=wpb.ENVIRONMENT_SANDBOX,
                    url=stack.receiver.url(path),
                    events=["booking.confirmed"],
                )
            )
            ids[reg.endpoint.id] = path
        for _ in range(events):
            await hooks.PublishEvent(
                wpb.PublishEventRequest(
                    account_id=acct,
                    environment=wpb.ENVIRONMENT_SANDBOX,
                    type="booking.confirmed",
                    data=event_data("booking.confirmed"),
                )
            )

    def received() -> dict[tuple[str, str], int]:
        """What the receiver answered, per endpoint and outcome (200 succeeded, 500 http_error)."""
        out: collections.Counter[tuple[str, str]] = collections.Counter()
        for r in list(stack.receiver.requests):
            endpoint = next((e for e, p in ids.items() if r.path == p), None)
            if endpoint is not None:
                out[(endpoint, "succeeded" if r.path == "/ok" else "http_error")] += 1
        return dict(out)

    async with httpx.AsyncClient(timeout=30) as http:
        got: dict[tuple[str, str], int] = {}
        for _ in range(150):
            before = received()
            resp = await http.get(
                stack.url("sandbox") + "/v1/usage/webhooks",
                headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {reader.secret}"},
            )
            assert resp.status_code == 200, resp.text
            got = {(r["endpoint"], r["outcome"]): r["count"] for r in resp.json()["data"]}
            ok_endpoint = next(e for e, p in ids.items() if p == "/ok")
            # The receiver held still around the read, and every event reached the good endpoint.
            if before == received() and before.get((ok_endpoint, "succeeded")) == events and got == before:
                break
            await asyncio.sleep(0.2)
        assert got == received()
        assert got[(ok_endpoint, "succeeded")] == events


async def count_of(auth: auth_pb2_grpc.AuthServiceStub, account_id: str) -> int:
    """The account's requests counted today (authsvc's day rollup)."""
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    query = pb.QueryUsageCountsRequest(account_id=account_id)
    getattr(query, "from").CopyFrom(ts(today - dt.timedelta(days=1)))
    query.to.CopyFrom(ts(today + dt.timedelta(days=1)))
    return sum(r.counts.count for r in (await auth.QueryUsageCounts(query)).rows)


async def test_a_killed_edge_loses_at_most_what_came_after_its_last_flush(
    usage_stack: Usage, tmp_path: pathlib.Path
) -> None:
    """SIGKILL between flushes: every request counted before the last flush is there, only those after
    it may be lost; a SIGTERM loses nothing (the last flush at the stop)."""
    stack = usage_stack
    interval = 4.0
    async with grpc.aio.insecure_channel(stack.auth.grpc_target) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        account = await auth.CreateAccount(
            pb.CreateAccountRequest(name="Kill", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
        )
        acct = account.account.id
        k = await key(auth, acct, "sandbox", ["account:read"])
        headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {k.secret}"}
        db = sqlite_url(tmp_path, "e2.db")
        args = [
            *edge_args(stack.auth.grpc_target, stack.hooks.grpc_target, db),
            "--usage-flush-interval",
            str(interval),
        ]

        async def send(edge: ServiceProcess, n: int) -> None:
            url = f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account"
            async with httpx.AsyncClient(timeout=10) as http:
                for _ in range(n):
                    assert (await http.get(url, headers=headers)).status_code == 200

        edge = ServiceProcess("edge", args).start(tmp_path / "kill.log")
        try:
            flushed = 40
            await send(edge, flushed)
            # Wait for a flush to carry all of them (the flusher's own timing: at most two intervals).
            for _ in range(int(interval * 2 / 0.1) + 20):
                if await count_of(auth, acct) == flushed:
                    break
                await asyncio.sleep(0.1)
            assert await count_of(auth, acct) == flushed
            # Right after a flush, before the next: more requests, then SIGKILL.
            after = 25
            await send(edge, after)
        finally:
            edge.kill()
        await asyncio.sleep(1.0)
        stored = await count_of(auth, acct)
        # Nothing counted before the last flush is lost, nothing is counted twice; at most the requests
        # after it are gone (the documented bound: one flush interval of requests).
        assert flushed <= stored <= flushed + after, stored

        # A graceful stop: the last flush at the stop carries everything.
        edge = ServiceProcess("edge", args).start(tmp_path / "term.log")
        try:
            await send(edge, 30)
        finally:
            assert edge.terminate() == 0
        assert await count_of(auth, acct) == stored + 30


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"groupBy": "key,week"}, "groupBy"),
        ({"groupBy": "hour,day"}, "groupBy"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-13-01"}, "to"),
        ({"from": "2026-11-20", "to": "2026-11-19"}, "to"),
        ({"environment": "prod"}, "environment"),
        ({"status": "abc"}, "status"),
        ({"key": "acct_x"}, "key"),
        ({"from": "2020-01-01", "to": "2026-01-01"}, "to"),
        # Not on a whole hour, and older than the minute counts' 48 hours.
        ({"from": "2026-01-01T10:30:00Z", "to": "2026-01-02T00:00:00Z", "groupBy": "hour"}, "from"),
    ],
)
async def test_bad_parameters_are_400_naming_the_parameter(
    usage_stack: Usage, params: dict[str, str], name: str
) -> None:
    async with grpc.aio.insecure_channel(usage_stack.auth.grpc_target) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        account = await auth.CreateAccount(
            pb.CreateAccountRequest(name="Bad", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
        )
        k = await key(auth, account.account.id, "sandbox", ["account:read"])
        narrow = await key(auth, account.account.id, "sandbox", ["hotels:read"])
    async with httpx.AsyncClient(timeout=10) as http:
        url = usage_stack.url("sandbox") + "/v1/usage"
        resp = await http.get(
            url, params=params, headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {k.secret}"}
        )
        assert resp.status_code == 400, resp.text
        error = resp.json()["error"]
        assert error["type"] == "invalid_request" and name in error["message"], error
        # Without account:read: 403 missing_scope.
        resp = await http.get(url, headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {narrow.secret}"})
        assert resp.status_code == 403 and resp.json()["error"]["type"] == "missing_scope"
        # text/csv is offered by the usage routes only.
        other = await http.get(
            usage_stack.url("sandbox") + "/v1/account",
            headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {k.secret}", "Accept": "text/csv"},
        )
        assert other.status_code == 406


def test_svcctl_usage_prints_the_counts_as_a_table(
    usage_stack: Usage, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = usage_stack
    with grpc.insecure_channel(stack.auth.grpc_target) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        acct = auth.CreateAccount(
            pb.CreateAccountRequest(name="Ops", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
        ).account.id
        k = auth.CreateKey(
            pb.CreateKeyRequest(
                account_id=acct,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="ops",
                scopes=["hotels:read"],
                actor=ACTOR,
            )
        )
    headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {k.secret}"}
    with httpx.Client(timeout=10) as http:
        for _ in range(7):
            assert http.get(stack.url("sandbox") + "/v1/hotels/search", headers=headers).status_code == 200
        for _ in range(3):
            assert http.get(stack.url("sandbox") + "/v1/account", headers=headers).status_code == 403
    argv = ["--authsvc", stack.auth.grpc_target, "--insecure-dev", "usage", "--account", acct]
    out = ""
    for _ in range(50):  # the edge flushes every 0.5 s
        assert svcctl([*argv, "--group-by", "key,route,status,error-type"]) == 0
        out = capsys.readouterr().out
        if "10 requests" in out:
            break
        time.sleep(0.2)
    lines = out.splitlines()
    assert lines[1].split() == [
        "key",
        "route",
        "status",
        "error-type",
        "count",
        "p50",
        "ms",
        "p95",
        "ms",
        "p99",
        "ms",
    ]
    rows = {tuple(line.split()[:6]) for line in lines[3:-1]}
    assert rows == {
        (k.key.id, "GET", "/v1/account", "403", "missing_scope", "3"),
        (k.key.id, "GET", "/v1/hotels/search", "200", "-", "7"),
    }
    assert lines[-1] == "2 rows, 10 requests"
    # A bad account id: an error line and exit code 1, no table.
    assert svcctl([*argv[:-1], "nope"]) == 1
    assert "invalid_request" in capsys.readouterr().err

#!/usr/bin/env python3
"""Soak (not a test): the whole stack under mixed traffic for --minutes (default 10), loopback only.

authsvc, webhookd, the edge and the portal run as processes on SQLite in a temporary directory, with
mutual TLS from a development CA made there (as scripts/run starts them); webhooks go to a plain-HTTP
receiver on loopback (webhookd --allow-private-targets --allow-http). Concurrently, for the duration:

- legitimate partner traffic from 127.0.0.1 on several keys of three accounts: GETs (account, endpoints,
  an offer, a booking), sandbox event POSTs with Idempotency-Keys (some replayed), bookings on the
  simulator, and one event stream per account;
- portal use from 127.0.0.1: a portal user signs in (again every two minutes) and loads pages;
- webhook bursts: every 20 s, 40 sandbox events at once to an account's two endpoints;
- floods from other addresses, one a minute in turn: portal sign-ins with made-up e-mails (127.0.0.2),
  stream connections opened and closed (127.0.0.3), ping frames on open streams (127.0.0.4), made-up
  keys whose checksum holds (127.0.0.5); each in a process of its own, the streams on another account.

Every 10 s it prints a line: each service's RSS (from /proc), the legitimate requests of the interval by
status class, their p50/p99, webhooks received and sandbox events accepted so far, the flood running.
Then a verdict:

- memory flat: per process, the median RSS of the last minute at most 10 % or 20 MB (the larger) above
  the second minute's;
- no 5xx (and no transport error, no stream closed 1011) for legitimate traffic: 4xx are counted, not
  failures (a 429 from a limit is an answer);
- every accepted sandbox event (202) delivered to as many endpoints as its deliveryCount says, within
  --drain-seconds of the end; every service still running.

Exit status 0 when all hold. Usage: ``.venv/bin/python scripts/soak.py [--minutes 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import pathlib
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SERVICES = ("authsvc", "webhookd", "edge", "portal")
FLOODS = {"sign-in": "127.0.0.2", "streams": "127.0.0.3", "pings": "127.0.0.4", "keys": "127.0.0.5"}
PASSWORD = "soak passphrase, long enough"
PORTAL_PAGES = [f"/sandbox/{p}" for p in ("", "keys", "deliveries", "events", "audit", "requests")] + [
    "/live/"
]
MB = 1024 * 1024
EVENT_EVERY = 3.0  # seconds between a partner key's event-making requests
CSRF = re.compile(r'name="csrf" value="([^"]*)"')
NOT_IN_NAME = re.compile(r"^https?://[^/]+|/bk_test_\w+")  # a request's name in the report: no host, no id
MESSAGE = re.compile(r'"message":\s*"([^"]*)"|role="alert">([^<]*)<')


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values) or [float("nan")]
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc), 0 once it is gone."""
    try:
        found = re.search(r"^VmRSS:\s+(\d+) kB", pathlib.Path(f"/proc/{pid}/status").read_text(), re.M)
    except OSError:
        return 0
    return int(found.group(1)) * 1024 if found else 0


def csrf_of(page: Any) -> str:
    found = CSRF.search(page.text if page is not None else "")
    return found.group(1) if found else ""


def stream_to(port: int, key: str, **kw: Any) -> Any:
    """A WebSocket /v1/stream of the edge's sandbox listener with ``key``."""
    from websockets.asyncio.client import connect

    from edge.testing import SANDBOX_HOST

    url = f"ws://{SANDBOX_HOST}/v1/stream"
    return connect(url, subprotocols=["svc", key], host="127.0.0.1", port=port, **kw)  # type: ignore[list-item]


# -- the floods (a process each) ---------------------------------------------------------------------------
def _flood(kind: str, source: str, urls: dict[str, Any], conns: int, stop: Event, sent: Any) -> None:
    """One flood from ``source`` until ``stop``; counts its operations in ``sent``."""
    import httpx
    import uvloop

    from edge.testing import SANDBOX_HOST
    from svckit.apikeys import checksum
    from svckit.ids import random_base62

    counts = [0] * conns

    async def signin(c: httpx.AsyncClient, i: int) -> None:
        form = {"csrf": csrf_of(await c.get(f"{urls['portal']}/signin")), "password": "a" * 16}
        while not stop.is_set():
            email = f"x{random_base62(8)}@flood.example"
            await c.post(f"{urls['portal']}/signin", data={**form, "email": email})
            counts[i] += 1

    async def keys(c: httpx.AsyncClient, i: int) -> None:
        while not stop.is_set():
            body = "svc_test_" + random_base62(32)
            headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {body + checksum(body)}"}
            await c.get(f"{urls['edge']}/v1/account", headers=headers)
            counts[i] += 1

    async def streams(c: httpx.AsyncClient, i: int, ping: bool = False) -> None:
        key = urls["flood_keys"][i % len(urls["flood_keys"])]
        async with stream_to(urls["edge_port"], key, local_addr=(source, 0), open_timeout=30) as ws:
            counts[i] += 1
            while ping and not stop.is_set():
                await ws.ping()
                counts[i] += 1

    async def pings(c: httpx.AsyncClient, i: int) -> None:
        await streams(c, i, ping=True)

    one = {"sign-in": signin, "keys": keys, "streams": streams, "pings": pings}[kind]

    async def main() -> None:
        transport = httpx.AsyncHTTPTransport(local_address=source)
        limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
        async with httpx.AsyncClient(transport=transport, limits=limits, timeout=30) as c:

            async def again(i: int) -> None:
                while not stop.is_set():
                    try:
                        await one(c, i)
                    except Exception:
                        await asyncio.sleep(0.01)  # refused past a cap or closed for its rate: go on

            await asyncio.gather(*(again(i) for i in range(conns)))
        with sent.get_lock():
            sent.value += sum(counts)

    uvloop.run(main())


# -- what the legitimate side saw --------------------------------------------------------------------------
@dataclass
class Tally:
    """Legitimate requests: per interval (reset at each sample) and in total."""

    interval_status: Counter[str] = field(default_factory=Counter)
    interval_ms: list[float] = field(default_factory=list)
    status: Counter[str] = field(default_factory=Counter)  # "edge 200", "portal 303", "edge error"
    ms: dict[str, list[float]] = field(default_factory=lambda: {"edge": [], "portal": []})
    failures: Counter[str] = field(default_factory=Counter)  # 5xx/errors by request and message
    accepted: dict[str, int] = field(default_factory=dict)  # sandbox event id -> deliveryCount
    stream_events: int = 0
    stream_closes: Counter[str] = field(default_factory=Counter)

    def note(self, surface: str, what: str, status: int | None, ms: float, detail: str = "") -> None:
        self.interval_status["err" if status is None else f"{status // 100}xx"] += 1
        self.interval_ms.append(ms)
        self.status[f"{surface} {status or 'error'}"] += 1
        self.ms[surface].append(ms)
        what = f"{surface} {status or 'error'} {what}: {detail[:150]}"
        if (status is None or status >= 500) and (what in self.failures or len(self.failures) < 20):
            self.failures[what] += 1

    def failed(self) -> int:
        """Legitimate requests answered 5xx or not at all."""
        return sum(n for k, n in self.status.items() if not k[-3:].isdigit() or int(k[-3:]) >= 500)


@dataclass
class Deliveries:
    """What the receiver got: event id -> the endpoint paths it reached (the receiver's thread writes)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: dict[str, set[str]] = field(default_factory=dict)
    count: int = 0

    def __call__(self, request: Any) -> int:
        with self.lock:
            self.count += 1
            self.seen.setdefault(request.headers.get("x-service-event-id", ""), set()).add(request.path)
        return 200

    def missing(self, accepted: dict[str, int]) -> int:
        with self.lock:
            return sum(max(0, n - len(self.seen.get(e, ()))) for e, n in accepted.items())


# -- the legitimate load -----------------------------------------------------------------------------------
@dataclass
class Load:
    edge_port: int
    portal_url: str
    tally: Tally
    end: float
    n: int = 0

    def running(self) -> bool:
        return time.monotonic() < self.end

    def ikey(self) -> str:
        self.n += 1
        return f"soak-{self.n}"

    async def timed(self, surface: str, c: Any, method: str, url: str, **kw: Any) -> Any:
        """One legitimate request, timed and tallied: its response, None on a transport error."""
        t, r, detail = time.perf_counter(), None, ""
        try:
            r = await c.request(method, url, **kw)
            detail = r.text if r.status_code >= 500 else ""
            found = MESSAGE.search(detail)  # the message of the edge's JSON error or of a portal error page
            detail = (found.group(1) or found.group(2)) if found else " ".join(detail.split())
        except Exception as exc:
            detail = detail or repr(exc)
        what, status = f"{method} {NOT_IN_NAME.sub('', url)}", None if r is None else r.status_code
        self.tally.note(surface, what, status, (time.perf_counter() - t) * 1000, detail)
        return r

    async def edge(self, c: Any, method: str, path: str, key: str, **kw: Any) -> Any:
        from edge.testing import SANDBOX_HOST

        headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {key}", **kw.pop("headers", {})}
        url = f"http://127.0.0.1:{self.edge_port}{path}"
        return await self.timed("edge", c, method, url, headers=headers, **kw)

    async def sample_event(self, c: Any, key: str, ikey: str = "") -> None:
        ikey = ikey or self.ikey()  # a replay sends the same body under the same key
        body = {"type": "booking.cancelled", "data": {"customerRef": ikey}}
        r = await self.edge(
            c, "POST", "/v1/sandbox/events", key, json=body, headers={"Idempotency-Key": ikey}
        )
        if r is not None and r.status_code == 202 and r.headers.get("idempotent-replayed") != "true":
            got = r.json()
            self.tally.accepted[got["event"]["id"]] = int(got["deliveryCount"])

    async def partner(self, key: str, step: int) -> None:
        """One key's sequential mix: mostly reads; a booking or a sample event (or its replay) at most
        every EVENT_EVERY seconds, so an account stays far from its 1,000 sandbox events a day."""
        import httpx

        last_ikey, next_event, made = "", time.monotonic() + step % 3, 0
        async with httpx.AsyncClient(timeout=60) as c:
            while self.running():
                step += 1
                if time.monotonic() >= next_event:  # in turn: two bookings, a sample event, its replay
                    next_event, made = time.monotonic() + EVENT_EVERY, made + 1
                    if made % 4 < 2:
                        headers = {
                            "Idempotency-Key": self.ikey(),
                            "X-Partner-Customer-Ref": f"cust-{step % 7}",
                        }
                        body = {"offer": "off_hotels_1"}
                        r = await self.edge(c, "POST", "/v1/hotels/bookings", key, json=body, headers=headers)
                        if r is not None and r.status_code == 202:
                            await self.edge(c, "GET", f"/v1/hotels/bookings/{r.json()['id']}", key)
                    else:  # the same Idempotency-Key again: a replay, no second event
                        last_ikey = self.ikey() if made % 4 == 2 else last_ikey
                        await self.sample_event(c, key, last_ikey)
                elif step % 6 < 4:
                    await self.edge(c, "GET", "/v1/account", key)
                else:
                    path = "/v1/webhooks/endpoints" if step % 6 == 4 else "/v1/hotels/offers/off_hotels_1"
                    await self.edge(c, "GET", path, key)
                await asyncio.sleep(0.1)

    async def bursts(self, keys: list[str], every: float, size: int) -> None:
        """``size`` sample events at once, every ``every`` seconds, each burst on the next account's key."""
        import httpx

        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        async with httpx.AsyncClient(timeout=60, limits=limits) as c:
            turn = 0
            while self.running():
                key, turn = keys[turn % len(keys)], turn + 1
                await asyncio.gather(*(self.sample_event(c, key) for _ in range(size)))
                await asyncio.sleep(every)

    async def stream(self, key: str) -> None:
        """One open event stream of the account, reconnecting when closed; counts events and closes."""
        from websockets.exceptions import ConnectionClosed

        while self.running():
            try:
                async with stream_to(self.edge_port, key, open_timeout=60) as ws:
                    while self.running():
                        try:
                            await asyncio.wait_for(ws.recv(), 1.0)
                            self.tally.stream_events += 1
                        except TimeoutError:
                            pass
            except ConnectionClosed as closed:
                code = str(closed.rcvd.code) if closed.rcvd is not None else "no close frame"
                self.tally.stream_closes[code] += 1
                if code == "1011":
                    self.tally.failures[f"stream closed 1011: {closed.rcvd}"] += 1
            except Exception as exc:
                self.tally.stream_closes[type(exc).__name__] += 1
                await asyncio.sleep(1)

    async def portal(self, email: str) -> None:
        """Sign in, load the pages in turn, sign out and in again every two minutes."""
        import httpx

        async with httpx.AsyncClient(base_url=self.portal_url, timeout=60) as c:
            while self.running():
                c.cookies.clear()
                form = {"csrf": csrf_of(await self.timed("portal", c, "GET", "/signin")), "email": email}
                r = await self.timed("portal", c, "POST", "/signin", data={**form, "password": PASSWORD})
                until, i, page = min(self.end, time.monotonic() + 120), 0, None
                while r is not None and r.status_code == 303 and time.monotonic() < until:
                    page = await self.timed("portal", c, "GET", PORTAL_PAGES[i % len(PORTAL_PAGES)]) or page
                    i += 1
                    await asyncio.sleep(0.2)
                if csrf_of(page):
                    await self.timed("portal", c, "POST", "/signout", data={"csrf": csrf_of(page)})
                else:
                    await asyncio.sleep(10)  # refused (429, a form gone wrong): try again later


# -- the stack ---------------------------------------------------------------------------------------------
def start_stack(tmp: pathlib.Path, log_level: str) -> dict[str, Any]:
    """The four services on SQLite in ``tmp``, mutual TLS from a development CA made in ``tmp/tls``."""
    from edge.testing import edge_args
    from svckit.devca import flags, init_dir
    from svckit.secretbox import write_new_key
    from tests.support import ServiceProcess, free_port, sqlite_url

    tls = tmp / "tls"
    init_dir(tls)

    def key_file(name: str) -> str:
        write_new_key(tmp / name)
        return str(tmp / name)

    def start(name: str, args: list[str]) -> Any:
        return ServiceProcess(name, args, tls=flags(tls, name)).start(tmp / f"{name}.log")

    common = ["--metrics-listen", "", "--log-level", log_level]
    # authsvc and webhookd call each other (its outbox; portal sessions): authsvc's port is chosen first.
    auth = f"127.0.0.1:{free_port()}"
    procs: dict[str, Any] = {}
    procs["webhookd"] = start("webhookd", [
        *common, "--listen", "127.0.0.1:0", "--database", sqlite_url(tmp, "webhookd.db"),
        "--authsvc", auth, "--allow-private-targets", "--allow-http",
        "--secrets-key-file", key_file("webhookd.key")])  # fmt: skip
    hooks = procs["webhookd"].grpc_target
    procs["authsvc"] = start("authsvc", [
        *common, "--listen", auth, "--database", sqlite_url(tmp, "authsvc.db"), "--webhookd", hooks,
        "--secrets-key-file", key_file("authsvc.key")])  # fmt: skip
    edge = edge_args(auth, hooks, sqlite_url(tmp, "edge.db"), None, "--log-level", log_level)
    procs["edge"] = start("edge", [*edge, "--idempotency-key-file", key_file("edge.key")])
    procs["portal"] = start("portal", [
        *common, "--listen", "127.0.0.1:0", "--authsvc", auth, "--webhookd", hooks,
        "--csrf-key-file", key_file("portal.key")])  # fmt: skip
    return procs


def seed(tmp: pathlib.Path, procs: dict[str, Any], receiver_port: int, per_account: int) -> dict[str, Any]:
    """Three partner accounts (keys, a portal owner on the first), three accounts for the bursts (one key
    each), two webhook endpoints on each of the six, and a noisy neighbour's account, made over gRPC with
    the operators' (svcctl) certificate. Bursts have accounts of their own as webhookd stores at most 1,000
    sandbox events per account a day (docs/webhooks.md "Sandbox bounds")."""
    import grpc

    from svckit.devca import files
    from svckit.scopes import ALL_SCOPES
    from svckit.tls import Tls
    from travel.auth.v1 import auth_pb2 as apb
    from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
    from travel.auth.v1 import identity_pb2 as ipb
    from travel.webhooks.v1 import webhooks_pb2 as wpb
    from travel.webhooks.v1 import webhooks_pb2_grpc

    creds = Tls.from_files(*files(tmp / "tls", "svcctl")).channel_credentials()
    actor = apb.Actor(user="ops:soak")
    out: dict[str, Any] = {"keys": [], "burst_keys": [], "stream_keys": [], "email": "owner@soak.example"}

    def channel(name: str) -> Any:
        target = procs[name].grpc_target
        return grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", name)])

    with channel("authsvc") as a, channel("webhookd") as w:
        auth, hooks = auth_pb2_grpc.AuthServiceStub(a), webhooks_pb2_grpc.WebhookServiceStub(w)

        def account(name: str, n: int) -> tuple[str, list[str]]:
            request = apb.CreateAccountRequest(name=name, mode=apb.ACCOUNT_MODE_A, actor=actor)
            account_id = auth.CreateAccount(request).account.id
            # A limit the soak never meets: it measures the services, not its keys' limits.
            key = apb.CreateKeyRequest(account_id=account_id, environment=apb.ENVIRONMENT_SANDBOX,
                                       scopes=list(ALL_SCOPES), actor=actor, rate_limit=100_000)  # fmt: skip
            return account_id, [auth.CreateKey(key).secret for _ in range(n)]

        sandbox: Any = {
            "environment": wpb.ENVIRONMENT_SANDBOX,
            "events": ["booking.cancelled", "booking.confirmed"],
        }
        for p in range(6):
            account_id, secrets = account(f"Soak {'partner' if p < 3 else 'bursts'} {p}", per_account)
            if p < 3:
                out["keys"] += secrets
                out["stream_keys"].append(secrets[0])
            else:
                out["burst_keys"].append(secrets[0])
            for e in range(2):
                url = f"http://127.0.0.1:{receiver_port}/p{p}/e{e}"
                hooks.RegisterEndpoint(wpb.RegisterEndpointRequest(account_id=account_id, url=url, **sandbox))
            if p == 0:
                ids = identity_pb2_grpc.IdentityServiceStub(a)
                invite = ipb.CreateInviteRequest(
                    account_id=account_id, email=out["email"], role=ipb.USER_ROLE_OWNER, actor=actor
                )
                token = ids.CreateInvite(invite).token
                ids.AcceptInvite(ipb.AcceptInviteRequest(token=token, password=PASSWORD))
        out["flood_keys"] = account("Noisy neighbour", 10)[1]
    return out


# -- the run -----------------------------------------------------------------------------------------------
class Floods:
    """One flood process at a time, each kind a minute in turn."""

    def __init__(self, urls: dict[str, Any], conns: int) -> None:
        self.urls, self.conns = urls, conns
        self.current: tuple[str, multiprocessing.Process, Event, Any, float] | None = None
        self.rates: list[str] = []

    @property
    def kind(self) -> str:
        return self.current[0] if self.current else "-"

    def run(self, kind: str) -> None:
        if self.kind != kind:
            self.stop()
            stop, sent = multiprocessing.Event(), multiprocessing.Value("l", 0)
            args = (kind, FLOODS[kind], self.urls, self.conns, stop, sent)
            proc = multiprocessing.Process(target=_flood, args=args, daemon=True)
            proc.start()
            self.current = (kind, proc, stop, sent, time.monotonic())

    def stop(self) -> None:
        if self.current is not None:
            kind, proc, stop, sent, since = self.current
            stop.set()
            proc.join(60)
            proc.kill()  # if still there
            self.rates.append(f"{kind} {sent.value / (time.monotonic() - since):.0f}/s")
            self.current = None


def memory_verdict(samples: list[tuple[float, dict[str, int]]]) -> list[tuple[str, bool, str]]:
    """Per service: median RSS of the last minute against the second minute's (at most +10 % or +20 MB).
    Medians, as a sign-in's argon2 hash lifts authsvc's RSS by its 64 MiB for a moment."""
    end = samples[-1][0] if samples else 0.0
    rows = []
    for name in SERVICES:
        second = [s[name] for t, s in samples if 60 < t <= 120]
        last = [s[name] for t, s in samples if t > max(end - 60, 120)]
        if not second or not last:
            rows.append((name, True, "too short to judge (needs --minutes 3 or more)"))
            continue
        a, b = statistics.median(second), statistics.median(last)
        line = f"2nd minute {a / MB:6.1f} MB -> last minute {b / MB:6.1f} MB ({(b - a) / MB:+.1f})"
        rows.append((name, b - a <= max(0.10 * a, 20 * MB), line))
    return rows


async def run(
    args: argparse.Namespace, procs: dict[str, Any], seeded: dict[str, Any], got: Deliveries
) -> int:
    edge_port = int(procs["edge"].ports["sandbox_port"])
    urls = {"portal": procs["portal"].ports["url"], "edge": f"http://127.0.0.1:{edge_port}",
            "edge_port": edge_port, "flood_keys": seeded["flood_keys"]}  # fmt: skip
    tally, started = Tally(), time.monotonic()
    end = started + args.minutes * 60
    load = Load(edge_port, urls["portal"], tally, end)
    tasks = [asyncio.create_task(load.partner(k, i * 3)) for i, k in enumerate(seeded["keys"])]
    tasks += [asyncio.create_task(load.stream(k)) for k in seeded["stream_keys"]]
    tasks.append(asyncio.create_task(load.portal(seeded["email"])))
    tasks.append(asyncio.create_task(load.bursts(seeded["burst_keys"], args.burst_every, args.burst_size)))
    floods = Floods(urls, args.flood_connections)
    samples: list[tuple[float, dict[str, int]]] = []
    classes = ("2xx", "3xx", "4xx", "5xx", "err")
    print(f"{'t s':>5} {'flood':8} " + " ".join(f"{n:>8}" for n in SERVICES) + " (RSS MB) reqs "
          + " ".join(f"{k:>4}" for k in classes) + "  p50 ms  p99 ms  hooks events", flush=True)  # fmt: skip
    next_sample = started + args.sample_seconds
    while True:
        now = time.monotonic()
        if now < end:
            floods.run(list(FLOODS)[int((now - started) // 60) % len(FLOODS)])
        else:
            floods.stop()
        if now >= next_sample:
            rss = {name: rss_bytes(procs[name].proc.pid) for name in SERVICES}
            samples.append((now - started, rss))
            st, ms = tally.interval_status, tally.interval_ms
            tally.interval_status, tally.interval_ms = Counter(), []
            print(
                f"{now - started:5.0f} {floods.kind:8} " + " ".join(f"{rss[n] / MB:8.1f}" for n in SERVICES)
                + f" {sum(st.values()):13d} " + " ".join(f"{st[k]:4d}" for k in classes)
                + f" {pct(ms, 50):7.1f} {pct(ms, 99):7.1f} {got.count:6d} {len(tally.accepted):6d}",
                flush=True,
            )  # fmt: skip
            next_sample += args.sample_seconds
            if any(p.proc.poll() is not None for p in procs.values()):
                print("a service exited; stopping", flush=True)
                break
            if now >= end:
                break
        await asyncio.sleep(min(0.5, max(0.0, next_sample - time.monotonic())))
    floods.stop()
    load.end = 0.0
    await asyncio.gather(*tasks, return_exceptions=True)
    drain_until = time.monotonic() + args.drain_seconds
    while got.missing(tally.accepted) and time.monotonic() < drain_until:  # noqa: ASYNC110
        await asyncio.sleep(1)  # the receiver's thread fills ``got``: polled
    return report(procs, tally, got, samples, floods.rates)


def report(
    procs: dict[str, Any], tally: Tally, got: Deliveries, samples: list[Any], flood_rates: list[str]
) -> int:
    print("\nlegitimate answers: " + ", ".join(f"{k} x{n}" for k, n in sorted(tally.status.items())))
    for surface, ms in tally.ms.items():
        print(f"{surface:7} {len(ms):6d} requests  p50 {pct(ms, 50):7.1f} ms  p99 {pct(ms, 99):7.1f} ms")
    closes = ", ".join(f"{k} x{n}" for k, n in sorted(tally.stream_closes.items())) or "none"
    print(f"streams: {tally.stream_events} events received; closes: {closes}")
    print("floods (operations/s): " + ", ".join(flood_rates))
    missing, expected = got.missing(tally.accepted), sum(tally.accepted.values())
    print(
        f"sandbox events accepted: {len(tally.accepted)}, deliveries expected {expected}, missing {missing}"
    )
    print(f"webhooks received in all: {got.count} (the bookings' booking.confirmed too)")
    for name, proc in procs.items():
        levels = Counter(re.findall(r'"level": "(\w+)"', proc.logs()))
        print(f"{name} log: " + (", ".join(f"{n} {k}" for k, n in sorted(levels.items())) or "empty"))
    ok = True
    print()
    for name, flat, line in memory_verdict(samples):
        ok &= flat
        print(f"memory {name:9s} {'flat' if flat else 'GROWING'}: {line}")
    failed, closed_1011 = tally.failed(), tally.stream_closes.get("1011", 0)
    print(f"5xx or no answer for legitimate traffic: {failed}; streams closed 1011: {closed_1011}")
    for line, n in tally.failures.most_common():
        print(f"  {n:5d} x {line}")
    print(f"every accepted sandbox event delivered: {'yes' if missing == 0 else f'NO, {missing} missing'}")
    alive = all(p.proc.poll() is None for p in procs.values())
    print(f"every service running at the end: {'yes' if alive else 'NO'}")
    ok &= failed == 0 and closed_1011 == 0 and missing == 0 and alive
    print(f"VERDICT: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--minutes", type=float, default=10.0, help="how long the load runs (default 10)")
    add("--sample-seconds", type=float, default=10.0, help="seconds between samples (default 10)")
    add("--keys-per-account", type=int, default=2, help="partner keys of each of the 3 accounts (default 2)")
    add("--burst-size", type=int, default=40, help="sample events per webhook burst (default 40)")
    add("--burst-every", type=float, default=20.0, help="seconds between webhook bursts (default 20)")
    add("--flood-connections", type=int, default=16, help="connections of each flood (default 16)")
    add("--drain-seconds", type=float, default=120.0, help="how long deliveries may trail (default 120)")
    add("--log-level", default="WARNING", help="the services' log level (default WARNING)")
    add("--keep", action="store_true", help="keep the temporary directory (logs, databases)")
    args = parser.parse_args()

    from webhookd.testing import Receiver

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="soak_"))
    got = Deliveries()
    receiver = Receiver(None, responder=got, record=False).start()
    procs: dict[str, Any] = {}
    try:
        procs = start_stack(tmp, args.log_level)
        seeded = seed(tmp, procs, receiver.port, args.keys_per_account)
        floods = ", ".join(f"{k} {a}" for k, a in FLOODS.items())
        print(f"soak: {args.minutes:g} min; floods from {floods}; logs in {tmp}", flush=True)
        return asyncio.run(run(args, procs, seeded, got))
    finally:
        for p in reversed(list(procs.values())):
            p.terminate()
        receiver.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

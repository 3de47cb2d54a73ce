"""The drill's run: set up (database, Redis, CA, processes, a partner account), traffic, the phases, the
drain (until every accepted event and revocation has its webhook, or a lease and a margin after the last
webhookd died), the report, the clean-up."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import shutil
import sys
import tempfile
import time
import uuid

import httpx

import drillkit
from drillkit.operator import ACTOR, Operator
from drillkit.options import parse
from drillkit.partner import Partner, drive
from drillkit.phases import RUN, Ctx, alerts_clear
from drillkit.prom import Prometheus, Sampler, binary
from drillkit.report import report, waiting
from drillkit.resources import Database, OwnRedis, Ports, forget_redis, previous_release
from drillkit.stack import Hotels, Stack, build_stack
from drillkit.watch import Watcher
from svckit.clients.auth import AuthClient
from svckit.devca import files
from svckit.tls import Tls
from tests.support import REDIS_URL
from travel.auth.v1 import auth_pb2 as pb
from webhookd.testing import Receiver, trusted_receiver

START_ORDER = ("authsvc#1", "authsvc#2", "webhookd#1", "webhookd#2", "edge#1", "edge#2", "portal")


async def setup_partner(
    stack: Stack, tls: Tls, receiver: Receiver, http: httpx.AsyncClient
) -> tuple[Partner, Operator, str]:
    clients = [AuthClient(target, tls, timeout=10) for target in stack.authsvc]
    made = await clients[0].create_account(
        pb.CreateAccountRequest(name="Drill Partner", mode=pb.ACCOUNT_MODE_A, actor=ACTOR),
        wait_for_ready=True,
    )
    account_id = made.account.id
    secrets = []
    for env, scopes in (
        (pb.ENVIRONMENT_LIVE, ["account:read"]),
        (pb.ENVIRONMENT_SANDBOX, ["account:read", "webhooks:read", "webhooks:write", "hotels:write"]),
    ):
        request = pb.CreateKeyRequest(
            account_id=account_id, environment=env, name="drill", scopes=scopes, actor=ACTOR
        )
        secrets.append((await clients[0].create_key(request)).secret)
    partner = Partner(http, stack.edges, stack.portal, secrets[0], secrets[1])
    endpoint = await http.post(
        f"{stack.edges[0][1]}/v1/webhooks/endpoints",
        headers={"Authorization": f"Bearer {secrets[1]}", "Idempotency-Key": str(uuid.uuid4())},
        json={"url": receiver.url(), "events": ["booking.confirmed", "apikey.revoked"]},
    )
    endpoint.raise_for_status()
    return partner, Operator(clients, account_id, http, stack.edges), str(endpoint.json()["secret"])


SCRAPED_LIMIT = 20.0  # seconds the baseline waits for Prometheus's first scrape of every target


async def drill(ctx: Ctx, tls: Tls, hotels: Hotels) -> int:
    http = httpx.AsyncClient(timeout=ctx.args.timeout, limits=httpx.Limits(max_connections=200))
    partner, operator, secret = await setup_partner(ctx.stack, tls, ctx.receiver, http)
    watcher = Watcher(ctx.stack, tls, http)
    stop, watching = asyncio.Event(), asyncio.Event()
    traffic = asyncio.create_task(drive(partner, ctx.args.rate, stop, ctx.args.slow_post > 0))
    revocations = asyncio.create_task(operator.run(1.0, stop))
    readiness = asyncio.create_task(watcher.run(watching))
    sampling = asyncio.create_task(ctx.sampler.run(watching)) if ctx.sampler else None
    baseline = ctx.begin("before the phases")
    await asyncio.sleep(ctx.args.warmup)
    if ctx.sampler is not None:  # the baseline judges nothing until Prometheus has scraped every target
        await ctx.sampler.wait_reached(baseline.start, SCRAPED_LIMIT)
    for name in ctx.args.phase_list:
        ctx.phase = name
        await RUN[name](ctx)
        if any(w.phase == name for w in ctx.windows):  # the phase ran (not skipped)
            await alerts_clear(ctx)
    ctx.phase = ""
    ctx.begin("drain")
    stop.set()
    await asyncio.gather(traffic, revocations)
    # Deliveries a killed webhookd held are sent again once their lease has run out: wait for that too.
    lease = ctx.args.lease_seconds
    deadline = max(time.monotonic() + ctx.args.drain, ctx.webhookd_stopped + lease + 20)
    hard_stop = time.monotonic() + lease + 120
    while True:  # the receiver runs in a thread of its own: poll it
        now = time.monotonic()
        if now >= hard_stop or (now >= deadline and not waiting(ctx.receiver.received(), partner, operator)):
            break
        await asyncio.sleep(0.5)
    ctx.windows[-1].end = time.monotonic()
    watching.set()
    await readiness
    if sampling is not None:
        await sampling
    await http.aclose()
    for client in operator.clients:
        await client.close()
    return report(ctx, partner, operator, watcher, ctx.receiver.received(), secret, hotels)


def run(args: argparse.Namespace) -> int:
    tag = f"drill_{uuid.uuid4().hex[:10]}"
    work = pathlib.Path(tempfile.mkdtemp(prefix="drill-"))
    ports = Ports(args.base_port)
    database = Database(args.database, tag, own=not args.in_given_database)
    asyncio.run(database.create())
    own_redis = None if args.redis else OwnRedis.start_if_installed(ports.take(), work)
    redis_url = args.redis or (own_redis.url if own_redis else REDIS_URL)
    prefix = f"{tag}:ratelimit:"
    receiver, ca_bundle = trusted_receiver(work)
    receiver.delay = args.receiver_delay  # so that deliveries are in flight when a webhookd dies
    hotels: Hotels | None = None
    stack: Stack | None = None
    prometheus: Prometheus | None = None
    status = 2
    try:
        previous = previous_release(work / "previous") if "release" in args.phase_list else None
        stack, hotels = build_stack(
            work, database.url, redis_url, prefix, str(ca_bundle), args, ports, previous
        )
        where = f"database {database.name}" + ("" if database.own else f", schema {database.schema}")
        print(f"{where}; Redis {redis_url}" + (" (the drill's own)" if own_redis else f", prefix {prefix}")
              + f"; phases: {', '.join(args.phase_list)}; logs in {work}", flush=True)  # fmt: skip
        exe = binary()
        if exe is None:
            print("prometheus is not installed: the alerts' expressions are not checked", flush=True)
        else:
            prometheus = Prometheus(exe, work, ports.take(), stack.metrics)
            prometheus.start()
        began = time.monotonic()
        for name in START_ORDER:
            stack.nodes[name].start()
        release = " (webhookd of the previous release)" if previous else ""
        print(f"{len(START_ORDER)} processes READY in {time.monotonic() - began:.1f} s{release}; edge#2 with "
              f"--workers {args.workers}; partner traffic at {args.rate}/s", flush=True)  # fmt: skip
        tls = Tls.from_files(*files(work / "tls", "svcctl"))
        ctx = Ctx(stack, args, database, own_redis, receiver)
        if prometheus is not None:
            rules = prometheus.rules()
            scraped = sum(map(len, stack.metrics.values()))
            ctx.sampler = Sampler(prometheus.url, rules, scraped)
            print(f"Prometheus {exe} at {prometheus.url}: {scraped} /metrics scraped each second, "
                  f"{len(rules)} alert expressions evaluated twice a second", flush=True)  # fmt: skip
        status = asyncio.run(drill(ctx, tls, hotels))
    finally:
        for node in stack.nodes.values() if stack else ():
            node.stop()
        receiver.stop()
        if prometheus is not None:
            prometheus.stop()
        if hotels is not None:
            hotels.stop()
        if own_redis is not None:
            own_redis.stop()
        else:
            asyncio.run(forget_redis(redis_url, f"{tag}:"))
        asyncio.run(database.drop())
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return status


def main(argv: list[str] | None = None) -> int:
    return run(parse(drillkit.__doc__ or "", argv))


if __name__ == "__main__":
    sys.exit(main())

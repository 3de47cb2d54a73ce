"""The phases an operator picks (``--phases``), each run while the partner and the operator keep calling; each
step opens a window of its own, which the report reads calls, flips and duplicates by."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from drillkit.alertcheck import BASELINE
from drillkit.resources import Database, OwnRedis, migrate_webhookd
from drillkit.stack import KILL_ORDER, Node, Stack
from webhookd.testing import Receiver

if TYPE_CHECKING:
    from drillkit.prom import Sampler

# The longest a phase's clear window waits for every alert's short form to be false again (seconds).
CLEAR_LIMIT = 60.0


@dataclass
class Window:
    name: str
    start: float  # monotonic
    end: float = 0.0
    restart_seconds: float = 0.0
    phase: str = ""  # BASELINE, a phase's name, or "" (not judged for the alerts: the drain)
    clear: bool = False  # the phase's last window: its alerts' conditions must be false by its end


@dataclass
class Ctx:
    stack: Stack
    args: argparse.Namespace
    database: Database
    redis: OwnRedis | None
    receiver: Receiver
    windows: list[Window] = field(default_factory=list)
    webhookd_stopped: float = 0.0  # monotonic, the last time a webhookd was killed or stopped
    skipped: list[str] = field(default_factory=list)
    phase: str = BASELINE  # the windows begun from now on belong to it
    sampler: Sampler | None = None  # the alerts' expressions, where Prometheus is installed

    def begin(self, name: str, clear: bool = False) -> Window:
        now = time.monotonic()
        if self.windows:
            self.windows[-1].end = now
        self.windows.append(Window(name, now, phase=self.phase, clear=clear))
        print(f"  {name}", flush=True)
        return self.windows[-1]


async def _start(node: Node) -> float:
    began = time.monotonic()
    await asyncio.to_thread(node.start)
    return time.monotonic() - began


async def release(ctx: Ctx) -> None:
    """The roll: this release's migrate beside the previous release's webhookd, then each replaced."""
    ctx.begin("release: migrate")
    print(f"    {await migrate_webhookd(ctx.database.url)}")
    await asyncio.sleep(ctx.args.settle)
    for name in ("webhookd#1", "webhookd#2"):
        node = ctx.stack.nodes[name]
        window = ctx.begin(f"release: {name} new")
        await asyncio.to_thread(node.stop)  # SIGTERM, as a roll replaces a process
        ctx.webhookd_stopped = time.monotonic()
        node.release = None
        window.restart_seconds = await _start(node)
        await asyncio.sleep(ctx.args.settle)


async def kills(ctx: Ctx) -> None:
    for name in KILL_ORDER:
        node = ctx.stack.nodes[name]
        window = ctx.begin(f"kill -9 {name}")
        node.kill()
        if node.module == "webhookd":
            ctx.webhookd_stopped = time.monotonic()
        await asyncio.sleep(ctx.args.down)
        window.restart_seconds = await _start(node)
        await asyncio.sleep(ctx.args.settle)


async def database(ctx: Ctx) -> None:
    if not (ctx.database.own or ctx.args.refuse_given_database):
        ctx.skipped.append("database: the given database is refused only with --refuse-given-database")
        return
    ctx.begin("database refuses")
    await ctx.database.refuse()
    await asyncio.sleep(ctx.args.down_database)
    ctx.begin("database back")
    await ctx.database.allow()
    await asyncio.sleep(ctx.args.settle)


async def redis(ctx: Ctx) -> None:
    own = ctx.redis
    if own is None:
        why = "--redis was given" if ctx.args.redis else "redis-server is not installed"
        ctx.skipped.append(f"redis: no Redis of the drill's own to stop ({why})")
        return
    ctx.begin("redis down")
    await asyncio.to_thread(own.stop)
    await asyncio.sleep(ctx.args.down)
    ctx.begin("redis back")
    await asyncio.to_thread(own.start)
    await asyncio.sleep(ctx.args.settle)


async def slow(ctx: Ctx) -> None:
    ctx.receiver.delay = ctx.args.slow_receiver
    ctx.begin("slow receiver")
    await asyncio.sleep(max(ctx.args.slow_receiver, 2.0))  # deliveries pile up in flight
    window = ctx.begin("slow: kill -9 webhookd#1")
    node = ctx.stack.nodes["webhookd#1"]
    node.kill()
    ctx.webhookd_stopped = time.monotonic()
    await asyncio.sleep(ctx.args.down)
    window.restart_seconds = await _start(node)
    await asyncio.sleep(ctx.args.settle)
    ctx.receiver.delay = ctx.args.receiver_delay


async def alerts_clear(ctx: Ctx) -> None:
    """The phase's clear window: until every alert's short form (drillkit.alertcheck) was false in two
    rounds of evaluation made in it, at most CLEAR_LIMIT seconds; what was still true then is judged."""
    sampler = ctx.sampler
    if sampler is None:
        return
    window = ctx.begin(f"{ctx.phase}: alerts clear", clear=True)
    began = sampler.rounds
    while time.monotonic() - window.start < CLEAR_LIMIT:
        await asyncio.sleep(1.0)
        if sampler.rounds - began >= 3 and not sampler.short_true():
            break
    still = sampler.short_true()
    print(f"    alerts' conditions false again after {time.monotonic() - window.start:.0f} s"
          + (f" (still true: {', '.join(still)})" if still else ""))  # fmt: skip


RUN: dict[str, Callable[[Ctx], Awaitable[None]]] = {
    "release": release,
    "kills": kills,
    "database": database,
    "redis": redis,
    "slow": slow,
}

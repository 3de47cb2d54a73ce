"""authsvc's background loops during a database outage: the outbox relay, the last_used flush and the
key-change listener each keep trying, and each logs one ``dependency unavailable`` line with a count
(svckit.outage.OutageLog), never a traceback per pass. Reproduction: PostgreSQL behind a proxy that is
switched off while the loops run every few milliseconds; the log lines are counted."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import urllib.parse
from typing import Any

import pytest
from prometheus_client import REGISTRY

from authsvc._lastused import LastUsed
from authsvc._outbox import OutboxRelay
from authsvc._sql import SqlRepository
from authsvc._watch import ChangeHub, PgListener, channel_name
from svckit.db import asyncpg_dsn, create_engine, normalize_url
from tests.conftest import PG_HOST, PG_PORT
from tests.integration.switchproxy import SwitchProxy

LOGGERS = ("authsvc._outbox", "authsvc._lastused", "authsvc._watch")
# Failed passes, over the three loops, after which a loop logging each pass would have shown it.
PASSES = 60


def failures() -> float:
    """The database's failures, whatever their reason (the proxy refusing, or cutting a connection)."""
    return sum(
        sample.value
        for family in REGISTRY.collect()
        if family.name == "dependency_failures"
        for sample in family.samples
        if sample.name == "dependency_failures_total" and sample.labels["dependency"] == "database"
    )


async def test_background_loops_log_one_line_per_outage_not_one_per_pass(
    pg_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    proxy = SwitchProxy(PG_HOST, PG_PORT)
    await proxy.on()
    url = pg_url.replace(f"@{PG_HOST}:{PG_PORT}/", f"@127.0.0.1:{proxy.port}/")
    assert urllib.parse.urlsplit(url).port == proxy.port
    engine = create_engine(url)
    repo = SqlRepository(engine, channel_name("bg"), "test-origin")
    dsn, settings = asyncpg_dsn(normalize_url(url))
    listener = PgListener(dsn, settings, channel_name("bg"), "test-origin", ChangeHub())
    relay = OutboxRelay(repo, "127.0.0.1:1", poll_interval=0.01)
    last_used = LastUsed(repo, interval=0.01)
    await listener.start()
    counted = {"relay": 0, "last_used": 0, "listener": 0}
    for name, outages in (
        ("relay", relay.outages),
        ("last_used", last_used.outages),
        ("listener", listener.outages),
    ):

        def add(
            what: str,
            exc: BaseException,
            reason: str | None = None,
            *,
            name: str = name,
            add: Any = outages.add,
        ) -> None:
            counted[name] += 1
            add(what, exc, reason)

        monkeypatch.setattr(outages, "add", add)
    try:
        await proxy.off()
        caplog.clear()
        before = failures()
        last_used.touch("key_1", dt.datetime.now(dt.UTC))
        relay.start()
        last_used.start()

        def lines() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.name in LOGGERS and r.levelno >= logging.WARNING]

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        # Every loop failed twice at least (the listener retries each second), and the loops counted
        # PASSES failures or logged that many lines, whichever comes first.
        while min(counted.values()) < 2 or failures() - before + len(lines()) < PASSES:
            assert loop.time() < deadline, (counted, failures() - before, len(lines()))
            await asyncio.sleep(0.02)
        logged = lines()
        assert not [r for r in logged if r.exc_info], "a traceback was logged for a pass"
        assert len(logged) <= len(LOGGERS), [r.getMessage() for r in logged]
        assert {r.getMessage() for r in logged} <= {"dependency unavailable"}
        assert failures() - before >= PASSES - len(logged)
    finally:
        await relay.stop()
        await listener.stop()
        last_used.pending.clear()
        await last_used.stop()
        await engine.dispose()
        await proxy.off()

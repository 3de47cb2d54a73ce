"""The gauges an operator pages on (docs/alerts.md): the outbox backlog, the certificate's expiry and the
database pool in use; and none of them is an empty or made-up family before there is something to
measure."""

from __future__ import annotations

import asyncio
import pathlib
import time
import urllib.request

import sqlalchemy as sa
from prometheus_client import REGISTRY, Counter

from authsvc._metrics import OutboxBacklog
from authsvc.testing import new_account, new_key, running_authsvc
from svckit import devca
from svckit.db import create_engine
from svckit.metrics import serve_metrics
from svckit.tls import Tls, seconds_until_expiry
from svckit.tlsflags import export_expiry
from travel.auth.v1 import auth_pb2 as pb


def sample(name: str) -> float | None:
    return REGISTRY.get_sample_value(name)


def test_certificate_expiry_is_seconds_until_the_own_certificate_ends(pki: pathlib.Path) -> None:
    tls = Tls.from_files(*devca.files(pki, "authsvc"))
    now = time.time()
    left = seconds_until_expiry(tls, now)
    assert devca.LEAF_DAYS * 86400 - 3600 < left <= devca.LEAF_DAYS * 86400
    assert seconds_until_expiry(tls, now + left + 10) < 0
    export_expiry(tls)
    exported = sample("tls_certificate_expiry_seconds")
    assert exported is not None and abs(exported - left) < 600


async def test_the_pool_gauge_counts_connections_checked_out(pg_url: str) -> None:
    engine = create_engine(pg_url, pool_size=3)
    try:
        before = sample("db_pool_connections_in_use")
        assert before is not None and (sample("db_pool_connections_max") or 0) >= 6
        async with engine.connect() as a, engine.connect() as b:
            await a.execute(sa.text("SELECT 1"))
            await b.execute(sa.text("SELECT 1"))
            assert sample("db_pool_connections_in_use") == before + 2
        assert sample("db_pool_connections_in_use") == before
    finally:
        await engine.dispose()


def test_the_backlog_exports_nothing_before_it_was_looked_at() -> None:
    backlog = OutboxBacklog()
    assert list(backlog.collect()) == []
    backlog.set(3, time.time() - 120)
    families = {f.name: f.samples[0].value for f in backlog.collect()}
    assert families["authsvc_outbox_pending"] == 3
    assert 119 <= families["authsvc_outbox_oldest_pending_age_seconds"] < 200


async def test_the_relay_measures_the_outbox_backlog(sqlite_url: str) -> None:
    # No webhookd answers: the revocation's event stays in the outbox.
    async with running_authsvc(sqlite_url, webhookd="127.0.0.1:1", outbox_poll_interval=0.05) as (
        server,
        stub,
    ):
        deadline = time.monotonic() + 10
        while sample("authsvc_outbox_pending") is None:  # the relay's first look
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        account = await new_account(stub)
        created = await new_key(stub, account.id)
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=created.key.id, actor=pb.Actor(user="ops:test")))
        pending, oldest = await server.repo.outbox_backlog()
        assert pending >= 1 and oldest is not None and oldest <= time.time()


def test_metrics_serves_no_empty_family() -> None:
    quiet = Counter("ops_test_never_counted_total", "a labelled family nothing counted", ["kind"])
    counted = Counter("ops_test_counted_total", "a labelled family counted once", ["kind"])
    counted.labels("x").inc()
    try:
        port = serve_metrics("127.0.0.1:0")
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        REGISTRY.unregister(quiet)
        REGISTRY.unregister(counted)
    assert 'ops_test_counted_total{kind="x"} 1.0' in text
    assert "ops_test_never_counted" not in text
    families: dict[str, int] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            current = line.split()[2]
            families[current] = 0
        elif line and not line.startswith("#"):
            families[current] += 1
    assert families and [name for name, n in families.items() if n == 0] == []

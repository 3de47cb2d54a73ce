"""The gauges the alerts read, as real processes export them right after READY, before any request:
``database_up`` only from processes with a database (authsvc, webhookd, the edge; never the portal) and
set by then; ``edge_ratelimit_redis_up`` only from an edge with --redis, from its ping at start. A gauge
left at a default 0 fired DatabaseDown and RedisDown for ever (an operator's drill)."""

from __future__ import annotations

import pathlib
import urllib.request

from edge.testing import edge_args
from tests.support import REDIS_URL, ServiceProcess, free_port, sqlite_url

METRICS = ["--metrics-listen", "127.0.0.1:0"]


def samples(process: ServiceProcess) -> dict[str, float]:
    url = f"http://127.0.0.1:{process.ports['metrics_port']}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_each_gauge_comes_from_its_owner_set_from_the_start(tmp_path: pathlib.Path) -> None:
    auth = ServiceProcess(
        "authsvc", ["--listen", "127.0.0.1:0", *METRICS, "--database", sqlite_url(tmp_path, "a.db")]
    ).start(tmp_path / "authsvc.log")
    procs = [auth]
    try:
        hooks = ServiceProcess(
            "webhookd", ["--listen", "127.0.0.1:0", *METRICS, "--database", sqlite_url(tmp_path, "w.db")]
        ).start(tmp_path / "webhookd.log")
        procs.append(hooks)
        args = edge_args(auth.grpc_target, hooks.grpc_target, sqlite_url(tmp_path, "e.db"))
        shared = ServiceProcess("edge", [*args, *METRICS, "--redis", REDIS_URL]).start(tmp_path / "e1.log")
        procs.append(shared)
        closed = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
        alone = ServiceProcess("edge", [*args, *METRICS, "--redis", closed]).start(tmp_path / "e2.log")
        procs.append(alone)
        plain = ServiceProcess("edge", [*args, *METRICS]).start(tmp_path / "e3.log")
        procs.append(plain)
        portal = ServiceProcess(
            "portal",
            [
                "--listen",
                "127.0.0.1:0",
                *METRICS,
                "--authsvc",
                auth.grpc_target,
                "--webhookd",
                hooks.grpc_target,
            ],
        ).start(tmp_path / "portal.log")
        procs.append(portal)

        for owner in (auth, hooks, shared, alone, plain):
            assert samples(owner)["database_up"] == 1, owner.module
        assert "database_up" not in samples(portal)
        assert samples(shared)["edge_ratelimit_redis_up"] == 1
        assert samples(alone)["edge_ratelimit_redis_up"] == 0
        for other in (plain, portal, auth, hooks):
            assert "edge_ratelimit_redis_up" not in samples(other)
    finally:
        for process in reversed(procs):
            process.terminate()

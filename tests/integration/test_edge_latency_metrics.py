"""The edge's latency histogram on /metrics (edge.metrics.REQUEST_SECONDS): one series per route template
and environment, answers and refusals alike, never a raw path."""

from __future__ import annotations

import asyncio
import pathlib
import re
import urllib.request

import grpc
import httpx

from edge.testing import Upstream, edge_args, write_route_table
from tests.integration.edge_stack import hdrs, new_key
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2_grpc


def latency_counts(metrics_port: int) -> dict[tuple[str, str], int]:
    """{(route, environment): count} of edge_http_request_duration_seconds on the edge's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    found = re.findall(
        r'^edge_http_request_duration_seconds_count\{environment="([^"]*)",route="([^"]*)"\} ([\d.]+)$',
        text,
        re.M,
    )
    return {(route, env): int(float(n)) for env, route, n in found}


async def test_latency_by_route_template_and_environment(tmp_path: pathlib.Path) -> None:
    live_up, sandbox_up = Upstream("live"), Upstream("sandbox")
    procs: list[ServiceProcess] = []
    try:
        auth_proc = start_service("authsvc", tmp_path, sqlite_url(tmp_path, "a.db"))
        procs.append(auth_proc)
        routes = write_route_table(tmp_path / "routes.json", live_up, sandbox_up)
        args = edge_args(auth_proc.grpc_target, "127.0.0.1:1", sqlite_url(tmp_path, "e.db"), routes)
        args[args.index("--metrics-listen") + 1] = "127.0.0.1:0"
        edge = ServiceProcess("edge", args).start(tmp_path / "edge.log")
        procs.append(edge)
        async with grpc.aio.insecure_channel(auth_proc.grpc_target) as channel:
            auth = auth_pb2_grpc.AuthServiceStub(channel)
            _, key = await new_key(auth, scopes=["account:read", "hotels:read"])
            _, live_key = await new_key(auth, scopes=["hotels:read"], env="live")
        sandbox = f"http://127.0.0.1:{edge.ports['sandbox_port']}"
        live = f"http://127.0.0.1:{edge.ports['live_port']}"
        async with httpx.AsyncClient(timeout=10) as http:
            for _ in range(3):
                assert (await http.get(sandbox + "/v1/account", headers=hdrs(key.secret))).status_code == 200
            for booking in ("bk_1", "bk_2"):
                r = await http.get(f"{sandbox}/v1/hotels/bookings/{booking}", headers=hdrs(key.secret))
                assert r.status_code == 200, r.text
            r = await http.get(live + "/v1/hotels/bookings/bk_3", headers=hdrs(live_key.secret, env="live"))
            assert r.status_code == 200, r.text
            # Refusals of a known key count under the route too: 403 missing_scope.
            r = await http.get(live + "/v1/account", headers=hdrs(live_key.secret, env="live"))
            assert r.status_code == 403, r.text
        counts = await asyncio.to_thread(latency_counts, edge.ports["metrics_port"])
        assert counts == {
            ("/v1/account", "sandbox"): 3,
            ("/v1/hotels/bookings/{booking_id}", "sandbox"): 2,
            ("/v1/hotels/bookings/{booking_id}", "live"): 1,
            ("/v1/account", "live"): 1,
        }
    finally:
        for proc in reversed(procs):
            proc.terminate()
        live_up.close()
        sandbox_up.close()

"""A dead edge's Idempotency-Key claim, with real processes on one PostgreSQL schema: while the edge
running a slow POST lives, its heartbeat keeps the claim its own past the takeover bound (a retry on the
other edge, held that long, is 409 and the upstream sees one request); once it is killed with SIGKILL
mid-POST, a retry sent at once to the other edge is held until the claim is taken over and runs (no 409,
no 120 s wait)."""

from __future__ import annotations

import asyncio
import pathlib

import httpx
import pytest

from edge.idempotency_claims import TAKEOVER_SECONDS
from edge.testing import Upstream, edge_args, write_route_table
from tests.e2e.test_edge_processes import authsvc, h, sandbox_key
from tests.support import ServiceProcess


async def _until_upstream_has(upstream: Upstream, n: int) -> None:
    for _ in range(400):
        if len(upstream.requests) >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the upstream never saw request {n}")


def _error_type(resp: httpx.Response) -> str:
    return str(resp.json()["error"]["type"])


async def test_a_live_claim_holds_and_a_killed_edges_claim_is_taken_over(
    pg_url: str, tmp_path: pathlib.Path
) -> None:
    live_up, sandbox_up = Upstream("live"), Upstream("sandbox")
    routes = write_route_table(tmp_path / "routes.json", live_up, sandbox_up)
    auth = authsvc(tmp_path, pg_url)
    edges = [
        ServiceProcess("edge", edge_args(auth.grpc_target, "127.0.0.1:1", pg_url, routes)).start(
            tmp_path / f"e{i}.log"
        )
        for i in range(2)
    ]
    try:
        _, secret = await sandbox_key(auth.grpc_target, ["hotels:write"])
        urls = [f"http://127.0.0.1:{e.ports['sandbox_port']}/v1/hotels/bookings" for e in edges]
        headers = h(
            secret, Idempotency_Key="kill-1", X_Partner_Customer_Ref="c-1", Content_Type="application/json"
        )
        async with httpx.AsyncClient(timeout=60) as c:
            # Edge 0 runs a POST slower than the takeover bound; past the bound, edge 1 still refuses the
            # retry: the live owner's heartbeat keeps the claim.
            slow = asyncio.create_task(
                c.post(urls[0] + f"?sleep={TAKEOVER_SECONDS * 4}", headers=headers, content=b"{}")
            )
            await _until_upstream_has(sandbox_up, 1)
            await asyncio.sleep(TAKEOVER_SECONDS + 2)
            busy = await c.post(urls[1], headers=headers, content=b"{}")
            assert busy.status_code == 409 and _error_type(busy) == "idempotency_key_in_use"
            assert "retry in" in busy.json()["error"]["message"]
            assert len(sandbox_up.requests) == 1

            # Edge 0 is killed mid-POST: the partner's connection breaks with no answer.
            edges[0].kill()
            with pytest.raises(httpx.TransportError):
                await slow
            # The partner's one retry, at once on edge 1: the claim still looks alive (its last beat is a
            # second or two old), so edge 1 holds the retry until the claim is taken over, then runs it.
            retried = await c.post(urls[1], headers=headers, content=b"{}")
            assert retried.status_code == 200, retried.text
            assert "idempotent-replayed" not in retried.headers
            assert len(sandbox_up.requests) == 2
            assert sandbox_up.requests[1].headers["idempotency-key"] == "kill-1"  # deduplicated downstream
            replay = await c.post(urls[1], headers=headers, content=b"{}")
            assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
        assert "took over an Idempotency-Key claim" in edges[1].logs()
    finally:
        for e in edges:
            e.kill()
        auth.terminate()
        live_up.close()
        sandbox_up.close()

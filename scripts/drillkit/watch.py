"""Readiness as a balancer sees it, twice a second: each edge's and the portal's ``GET /readyz`` and the gRPC
health of each authsvc and webhookd; every change is kept (a flip), with when it happened."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from drillkit.stack import Stack
from svckit.tls import Tls, channel


@dataclass
class Flip:
    at: float  # monotonic
    node: str
    became: str  # "ready", "not ready (503)", "down (ConnectError)", ...


@dataclass
class Watcher:
    stack: Stack
    tls: Tls
    http: httpx.AsyncClient
    flips: list[Flip] = field(default_factory=list)
    state: dict[str, str] = field(default_factory=dict)

    async def _http(self, url: str) -> str:
        try:
            resp = await self.http.get(f"{url}/readyz", timeout=2)
        except httpx.TransportError as exc:
            return f"down ({type(exc).__name__})"
        return "ready" if resp.status_code == 200 else f"not ready ({resp.status_code})"

    async def _grpc(self, target: str, server: str) -> str:
        ch = channel(target, self.tls, server)
        try:
            resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except Exception as exc:  # any failure is "not ready", named
            code = getattr(exc, "code", None)
            return f"down ({code().name if callable(code) else type(exc).__name__})"
        finally:
            await ch.close()
        return "ready" if resp.status == health_pb2.HealthCheckResponse.SERVING else "not ready (NOT_SERVING)"

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            names = [f"authsvc#{i + 1}" for i in range(2)] + [f"webhookd#{i + 1}" for i in range(2)]
            rounds = [self._grpc(t, "authsvc") for t in self.stack.authsvc]
            rounds += [self._grpc(t, "webhookd") for t in self.stack.webhookd]
            names += [f"edge#{i + 1}" for i in range(2)] + ["portal"]
            rounds += [self._http(live) for live, _ in self.stack.edges] + [self._http(self.stack.portal)]
            now = time.monotonic()
            for name, became in zip(names, await asyncio.gather(*rounds), strict=True):
                if self.state.get(name, "ready") != became:
                    self.flips.append(Flip(now, name, became))
                self.state[name] = became
            await asyncio.sleep(0.5)

"""webhookd's HTTP transport: svckit.http's pooled h11 transport connecting only to addresses the SSRF
guard (``_ssrf.resolve_checked``) has checked; with ``proxy`` (``--egress-proxy``) through an HTTP CONNECT
proxy to those checked addresses."""

from __future__ import annotations

import httpx

from svckit.http import MAX_BODY_READ, PooledTransport
from webhookd._errors import UnsafeTarget
from webhookd._ssrf import Policy, Resolver, resolve_checked, system_resolver

__all__ = ["MAX_BODY_READ", "FastTransport"]


class FastTransport(PooledTransport):
    def __init__(
        self,
        policy: Policy,
        *,
        ca_bundle: str | None = None,
        resolver: Resolver = system_resolver,
        max_idle_per_origin: int = 256,
        keepalive_expiry: float = 30.0,
        proxy: tuple[str, int] | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        super().__init__(
            self._checked,
            ca_bundle=ca_bundle,
            max_idle_per_origin=max_idle_per_origin,
            keepalive_expiry=keepalive_expiry,
            proxy=proxy,
        )

    async def _checked(self, host: str, port: int) -> list[str]:
        try:
            return await resolve_checked(host, port, self.policy, self.resolver)
        except UnsafeTarget as exc:
            raise httpx.ConnectError(exc.message) from None

"""The edge's hop to the product upstreams: HTTPS with the edge's own certificate (mutual TLS, the
deployment's CA), so an upstream can trust the identity headers (``X-Account-Id``, ``X-Key-Id``,
``X-Environment``) because only the edge holds a certificate named ``edge``. Plaintext only with
``--insecure-dev``, as for the gRPC hops.

Why refuse an ``http://`` upstream at start-up when TLS is configured, instead of calling it as written:
the identity headers would travel unauthenticated and any process that can reach the upstream could send
the same ones; a route table mistake is better found before the first partner request.
"""

from __future__ import annotations

import time

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edge.environments import Environment
from edge.gate import Ctx
from edge.routetable import BUILTIN, RouteTable, RouteTableError
from svckit import edgeassertion
from svckit.fileerrors import cannot_read
from svckit.http import PooledTransport, system_addresses
from svckit.tls import Tls

ASSERTION_HEADER = edgeassertion.HEADER


def plaintext_upstreams(routes: RouteTable) -> list[str]:
    """``METHOD PATH (environment): URL`` of every route whose upstream is plain ``http://``. Pure."""
    found: list[str] = []
    for route in routes.routes:
        for env in Environment:
            url = route.upstream[env]
            if url != BUILTIN and not url.startswith("https://"):
                found.append(f"{route.method} {route.path} ({env.value}): {url}")
    return found


def check_routes(routes: RouteTable, tls: Tls | None) -> None:
    """Refuse (RouteTableError) a plaintext upstream unless the edge runs ``--insecure-dev``."""
    if tls is None:
        return
    plain = plaintext_upstreams(routes)
    if plain:
        raise RouteTableError(
            f"the product upstreams are called over mutual TLS; these are plain http: {'; '.join(plain[:3])}"
            f"{' ...' if len(plain) > 3 else ''} (use https://, or --insecure-dev for a development stack)"
        )


def upstream_transport(tls: Tls | None, max_body: int) -> httpx.AsyncBaseTransport:
    """The pooled transport to the upstreams: with ``tls``, upstream certificates are verified against
    the deployment's CA only (and the URL's host name), and the edge presents its own certificate."""
    transport = PooledTransport(system_addresses, max_body=max_body, refuse_longer=True)
    if tls is not None:
        transport.ssl_context = tls.ssl_context(server=False)
    return transport


def signing_key(path: str) -> Ed25519PrivateKey | None:
    """The Ed25519 private key of ``--upstream-signing-key-file`` (PEM, unencrypted), None without one;
    ValueError naming the flag when the file is unusable."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except PermissionError as exc:
        raise ValueError(f"--upstream-signing-key-file: {cannot_read(exc, path)}") from None
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"--upstream-signing-key-file: cannot load {path}: {type(exc).__name__}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"--upstream-signing-key-file: {path} is not an Ed25519 private key")
    return key


def assertion(key: Ed25519PrivateKey, ctx: Ctx, method: str, path: str) -> str:
    """``X-Edge-Assertion`` of a product request: its identity, signed, for this method and path only."""
    caller = ctx.caller
    claims = edgeassertion.claims_for(
        caller.account_id,
        caller.key_id,
        ctx.environment.value,
        ctx.traveller_id or "",
        ctx.request_id,
        method,
        path,
        time.time(),
    )
    return edgeassertion.sign(key, claims)

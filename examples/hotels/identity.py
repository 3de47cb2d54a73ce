"""Whose request this is: the identity headers count only when the peer that sent them is the edge.

Why: the edge authenticates the partner's API key and forwards the outcome as plain headers
(``X-Account-Id``, ``X-Key-Id``, ``X-Environment``). Anyone who can reach the upstream could write the same
headers, so they are believed only from a connection whose client certificate (mutual TLS, verified
against the deployment's CA in the handshake) names an identity in ``trusted`` (the edge). Another
holder of a certificate from the same CA (a product service, the portal) is refused too: only the edge
speaks for partners. Without TLS (``--insecure-dev``) there is no peer to check and the headers are taken
as sent, which is why that mode is for a development stack only.

Behind a proxy that ends TLS the peer is the proxy, so a service started with the edge's public key
(``--edge-public-key``) takes the identity from the edge's signed assertion instead (``X-Edge-Assertion``,
svckit.edgeassertion, verified before this is asked) and ignores the peer and the identity headers. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from svckit.edgeassertion import Claims

ENVIRONMENTS = ("live", "sandbox")
_ID = re.compile(r"^[a-z]{2,8}_[A-Za-z0-9_]{1,64}$")


@dataclass(frozen=True)
class Identity:
    account_id: str
    key_id: str
    environment: str  # live or sandbox
    traveller_id: str = ""


@dataclass(frozen=True)
class Refusal:
    status: int
    type: str  # the error table's (docs/errors.md)
    message: str


def identify(
    peer: str | None,
    headers: Mapping[str, str],
    *,
    trusted: Collection[str],
    tls: bool,
    asserted: Claims | str | None = None,
) -> Identity | Refusal:
    """The caller's identity from ``headers`` (lower-case names), or why the request is refused.
    ``peer`` is the common name of the client certificate (None: none was presented); ``tls`` False is
    ``--insecure-dev``; ``asserted`` is what verifying the edge's assertion gave (its claims or why it
    is refused), None when the service does not use assertions."""
    if asserted is not None:
        if isinstance(asserted, str):
            return Refusal(
                403, "forbidden", f"X-Edge-Assertion: {asserted}; only the edge may call this service"
            )
        headers = {
            "x-account-id": asserted.account,
            "x-key-id": asserted.key,
            "x-environment": asserted.environment,
            "x-traveller-id": asserted.traveller,
        }
    elif tls and peer not in trusted:
        who = f"the certificate {peer!r}" if peer else "a peer without a certificate"
        return Refusal(403, "forbidden", f"{who} may not call this service; only the edge may")
    account = headers.get("x-account-id", "")
    key = headers.get("x-key-id", "")
    env = headers.get("x-environment", "")
    traveller = headers.get("x-traveller-id", "")
    if not _ID.match(account) or not account.startswith("acct_"):
        return Refusal(400, "invalid_request", "X-Account-Id: missing or not an account id")
    if key and not (_ID.match(key) and key.startswith("key_")):
        return Refusal(400, "invalid_request", "X-Key-Id: not a key id")
    if env not in ENVIRONMENTS:
        return Refusal(400, "invalid_request", "X-Environment: must be live or sandbox")
    if traveller and not (_ID.match(traveller) and traveller.startswith("trv_")):
        return Refusal(400, "invalid_request", "X-Traveller-Id: not a traveller id")
    return Identity(account, key, env, traveller)

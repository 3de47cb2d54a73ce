"""Who is calling, and what they may call: the identity in the caller's client certificate and the
allow list of RPCs per identity, enforced by a server interceptor on every mutual-TLS server.

The handshake already proved the certificate chains to the deployment's CA (``svckit.tls``); the allow
list then gives each service only the RPCs its code calls, so a compromised edge cannot create keys or
name an actor of its choosing. Anything not listed is PERMISSION_DENIED.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

import grpc

from svckit.metrics import GRPC_REFUSED

log = logging.getLogger(__name__)

AUTH = "travel.auth.v1.AuthService/"
HOOKS = "travel.webhooks.v1.WebhookService/"
# Any certificate from our CA may ask whether a service is up and what it serves.
OPEN_TO_EVERY_PEER = ("grpc.health.v1.Health/", "grpc.reflection.v1alpha.ServerReflection/")
# Operators' CLI and the partner portal administer everything (and pass the acting user as the actor).
# Some RPCs are theirs alone and must never be listed for another service below: writing the audit
# trail in a user's name (IdentityService.RecordAuditEvent) is one.
OPERATORS = frozenset({"svcctl", "portal"})
OPERATORS_ONLY = frozenset({"travel.auth.v1.IdentityService/RecordAuditEvent"})
# RPCs whose records only the service listed for them writes, operators included: the request log is what
# the edge answered partners (AuthService.RecordRequests), never what a person says it answered.
NOT_FOR_OPERATORS = frozenset({"travel.auth.v1.AuthService/RecordRequests"})
# Product services (certificate name ``product:<name>``, e.g. ``product:hotels``) share one entry.
PRODUCT_PREFIX = "product:"

# What a product service (hotels, flights, esim) needs of authsvc: check a partner's key (Authenticate,
# Authorize), name its traveller, read the account's mode and status (any account: a product serves every
# partner) and its usage, count searches. Nothing that creates, changes or lists keys or accounts, watches
# keys or reads the audit trail. Its events go to webhookd's PublishEvent (live ones too: may_publish).
PRODUCT_AUTH_METHODS = (
    "Authenticate",
    "Authorize",
    "ResolveTraveller",
    "GetAccount",
    "GetUsage",
    "ConsumeSearch",
)

ALLOWED: dict[str, frozenset[str]] = {
    # The partner gateway: key checks, travellers, usage, and the partner's own webhook management.
    "edge": frozenset(
        [
            *(
                AUTH + m
                for m in (
                    "Authorize",
                    "WatchKeyChanges",
                    "ResolveTraveller",
                    "DeleteTraveller",
                    "ConsumeSearch",
                    "GetUsage",
                    # The request log: what it answered partners (edge.requestlog).
                    "RecordRequests",
                )
            ),
            *(
                HOOKS + m
                for m in (
                    "RegisterEndpoint",
                    "GetEndpoint",
                    "ListEndpoints",
                    "UpdateEndpoint",
                    "DeleteEndpoint",
                    "EnableEndpoint",
                    "RotateSigningSecret",
                    "SendTestEvent",
                    "ListDeliveries",
                    "ListAttempts",
                    "ResendAttempt",
                    "RecoverEndpoint",
                    "StreamEvents",
                    "ListEvents",
                    "GetEvent",
                    # Sandbox events only (triggers, samples, the simulator): see may_publish.
                    "PublishEvent",
                    # The sandbox clock (POST /v1/sandbox/clock/advance): webhookd refuses every other
                    # environment, whoever calls.
                    "AdvanceSandboxClock",
                )
            ),
        ]
    ),
    # authsvc's outbox relay publishes apikey.revoked and search_quota.threshold.
    "authsvc": frozenset([HOOKS + "PublishEvent"]),
    # webhookd looks up an account's mode (GetAccount) and who its alert e-mails go to (GetAlertRecipients;
    # an authsvc too old for it: GetAccount's admin_emails).
    "webhookd": frozenset([AUTH + "GetAccount", AUTH + "GetAlertRecipients"]),
    "product": frozenset([*(AUTH + m for m in PRODUCT_AUTH_METHODS), HOOKS + "PublishEvent"]),
    # The billing service (certificate ``billing``): an account turns read-only after an unpaid settlement
    # charge and active again once billing records the payment, both with SetAccountStatus (audited as
    # service ``billing``); GetAccount to read the status first; PublishEvent for the settlement events it
    # owns (the event catalog names billing as their publisher). Nothing about keys, users or endpoints.
    "billing": frozenset([AUTH + "SetAccountStatus", AUTH + "GetAccount", HOOKS + "PublishEvent"]),
}


def role_of(identity: str) -> str:
    """The allow-list entry of a certificate identity: ``product:<name>`` is ``product``."""
    if identity.startswith(PRODUCT_PREFIX) and len(identity) > len(PRODUCT_PREFIX):
        return "product"
    return identity


# The allow list turned around, once: method -> the roles that may call it.
ROLES_BY_METHOD: dict[str, frozenset[str]] = {
    method: frozenset(role for role, methods in ALLOWED.items() if method in methods)
    for method in frozenset().union(*ALLOWED.values())
}


def permits(method: str) -> Callable[[str], bool]:
    """The allow list of one method (``/package.Service/Method``) as a test of a caller's identity: the
    per-method part decided once, so a call costs a set look-up."""
    method = method.lstrip("/")
    if method.startswith(OPEN_TO_EVERY_PEER):
        return bool
    # An operators-only method is refused to every other identity even if an entry above listed it.
    roles = frozenset() if method in OPERATORS_ONLY else ROLES_BY_METHOD.get(method, frozenset())
    operators = frozenset() if method in NOT_FOR_OPERATORS else OPERATORS

    def test(identity: str) -> bool:
        return identity in operators or role_of(identity) in roles

    return test


def allowed(identity: str, method: str) -> bool:
    """May the caller whose certificate names ``identity`` call ``method`` (``/package.Service/Method``)?"""
    return permits(method)(identity)


# The identity of the call being served (set by the interceptor; "" on a plaintext server), for records
# such as the audit trail's actor that must name the calling service.
caller_var: ContextVar[str] = ContextVar("grpc_caller", default="")

# Live events come from the services that own what they report; the edge publishes the sandbox's only.
SANDBOX_ONLY_PUBLISHERS = frozenset({"edge"})


def may_publish(identity: str, live: bool) -> bool:
    """May a caller whose PublishEvent passed the allow list publish this event (``live`` or sandbox)?
    A compromised edge must not be able to send partners signed live events."""
    return not live or role_of(identity) not in SANDBOX_ONLY_PUBLISHERS


async def refuse(context: grpc.aio.ServicerContext, identity: str, method: str, message: str) -> None:
    """Abort the call with PERMISSION_DENIED (raises); counted and logged with the caller's identity."""
    GRPC_REFUSED.labels(method.rsplit("/", 1)[-1], identity).inc()
    log.warning("call refused", extra={"peer": identity, "method": method, "reason": message})
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, message)


def identity_of(context: grpc.aio.ServicerContext) -> str:
    """The common name of the caller's verified client certificate; "" on a plaintext server."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode() if names else ""


def guard(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` of ``method`` refusing, with PERMISSION_DENIED, any call whose certificate identity the
    allow list does not permit, and naming the caller in ``caller_var`` while it runs. Built once per
    method when the server registers it (svckit.grpc_server), not per call."""
    permitted = permits(method)

    async def check(context: grpc.aio.ServicerContext) -> str:
        identity = identity_of(context)
        if not permitted(identity):
            await refuse(context, identity, method, f"the service {identity!r} may not call {method}")
        return identity

    def unary(behavior: Any) -> Any:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            token = caller_var.set(await check(context))
            try:
                return await behavior(request, context)
            finally:
                caller_var.reset(token)

        return guarded

    def streaming(behavior: Any) -> Any:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            token = caller_var.set(await check(context))
            try:
                async for item in behavior(request, context):
                    yield item
            finally:
                caller_var.reset(token)

        return guarded

    # RpcMethodHandler is a named tuple: replace the one behaviour this method has.
    for kind, wrap in (
        ("unary_unary", unary),
        ("stream_unary", unary),
        ("unary_stream", streaming),
        ("stream_stream", streaming),
    ):
        behavior = getattr(handler, kind)
        if behavior is not None:
            return handler._replace(**{kind: wrap(behavior)})
    return handler

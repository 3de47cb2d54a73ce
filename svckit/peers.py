"""Who is calling, and what they may call: the identity in the caller's client certificate and the
allow list of RPCs per identity, enforced by a server interceptor on every mutual-TLS server.

The handshake already proved the certificate chains to the deployment's CA (``svckit.tls``); the allow
list then gives each service only the RPCs its code calls, so a compromised edge cannot create keys or
name an actor of its choosing. Anything not listed is PERMISSION_DENIED.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc

from svckit.errors import ServiceError, to_grpc_status
from svckit.metrics import GRPC_REFUSED
from svckit.portal_calls import PORTAL_CALLS, SESSION_HEADER, PortalUser, needs_session, refusal
from svckit.publishers import may_publish as may_publish
from svckit.publishers import publish_refusal as publish_refusal

log = logging.getLogger(__name__)

AUTH = "travel.auth.v1.AuthService/"
HOOKS = "travel.webhooks.v1.WebhookService/"
# Any certificate from our CA may ask whether a service is up and what it serves.
OPEN_TO_EVERY_PEER = ("grpc.health.v1.Health/", "grpc.reflection.v1alpha.ServerReflection/")
# The operators' CLI administers everything (and passes the acting operator as the actor). Some RPCs are
# for operators and the portal alone and must never be listed for another service below: writing the
# audit trail in a user's name (IdentityService.RecordAuditEvent) is one.
OPERATORS = frozenset({"svcctl"})
OPERATORS_ONLY = frozenset({"travel.auth.v1.IdentityService/RecordAuditEvent"})
# The partner portal calls what its pages need, each on behalf of the signed-in user whose session the
# call carries (svckit.portal_calls): its certificate alone signs in and nothing more.
PORTAL = "portal"
# RPCs whose records only the service listed for them writes, operators included: the request log is what
# the edge answered partners (AuthService.RecordRequests), never what a person says it answered.
NOT_FOR_OPERATORS = frozenset(
    {"travel.auth.v1.AuthService/RecordRequests", "travel.auth.v1.AuthService/RecordUsageCounts"}
)
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
    # Mode A credit: a hold when a booking starts, captured on confirm, released on failure or cancel,
    # and the account's balance read (its entries are the partner's and operators' to list).
    "PlaceCreditHold",
    "CaptureCreditHold",
    "ReleaseCreditHold",
    "GetCreditLedger",
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
                    # Usage counts: what it answered, counted (edge.usagecounts), and GET /v1/usage.
                    "RecordUsageCounts",
                    "QueryUsageCounts",
                    # GET /v1/ledger: the partner reads its own mode A credit (never changes it).
                    "GetCreditLedger",
                    "ListLedgerEntries",
                    # Secret scanning: keys reported found in public die at once (edge.blueprints.leaks),
                    # and a key revokes itself (DELETE /v1/keys/self). Both name keys by the SHA-256 of
                    # a secret the edge was given: never a key by its id.
                    "RevokeLeakedKeys",
                    "RevokeOwnKey",
                    # Certification runs (edge.certification): the fault schedule, the run key's full
                    # record, and the published report-signing keys.
                    "ClaimCertificationFault",
                    "RecordCertificationRequests",
                    "ListCertificationKeys",
                    # A partner's own runs (edge.blueprints.certification): the calling key's.
                    "StartCertificationRun",
                    "GetCertificationRun",
                    "FinishCertificationRun",
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
                    "ListSigningKeys",
                    # A polling endpoint's consumers (GET .../poll, POST .../poll/commit).
                    "PollEndpoint",
                    "CommitPoll",
                    # GET /v1/usage/webhooks: the partner's own delivery counts.
                    "QueryDeliveryCounts",
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
    # CountEvents: the confirmed bookings of its look-to-book alerts.
    # Finishing a certification run (authsvc._certify_close): the probes, the sandbox endpoints' kinds
    # and the run's deliveries.
    "authsvc": frozenset(
        [
            HOOKS + "PublishEvent",
            HOOKS + "CountEvents",
            HOOKS + "SendCertificationProbes",
            HOOKS + "ListEndpoints",
            HOOKS + "ListDeliveries",
        ]
    ),
    # webhookd looks up an account's mode (GetAccount) and who its alert e-mails go to (GetAlertRecipients;
    # an authsvc too old for it: GetAccount's admin_emails).
    # GetSession: who a portal call is made for (svckit.portal_calls).
    "webhookd": frozenset(
        [AUTH + "GetAccount", AUTH + "GetAlertRecipients", "travel.auth.v1.IdentityService/GetSession"]
    ),
    PORTAL: frozenset(PORTAL_CALLS),
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
    # An operators-only method is refused to every other identity than the portal even if an entry above
    # listed it.
    roles = ROLES_BY_METHOD.get(method, frozenset())
    if method in OPERATORS_ONLY:
        roles &= {PORTAL}
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

# Who may publish which event (the catalog's publishers; the edge and svcctl sandbox events only) is a pure
# decision of its own, svckit.publishers (may_publish, publish_refusal: imported above), that refines
# this allow list's PublishEvent entries.


async def refuse(
    context: grpc.aio.ServicerContext,
    identity: str,
    method: str,
    message: str,
    error: str = "",
    metadata: dict[str, str] | None = None,
) -> None:
    """Abort the call (raises); counted and logged with the caller's identity. Without ``error``:
    PERMISSION_DENIED without ErrorInfo (the allow list: a deployment fault, read as internal_error);
    with it, that error type (a portal call's session or role: the portal shows it as such), and
    ``metadata`` in its ErrorInfo."""
    GRPC_REFUSED.labels(method.rsplit("/", 1)[-1], identity).inc()
    log.warning("call refused", extra={"peer": identity, "method": method, "reason": message})
    if error:
        await context.abort_with_status(to_grpc_status(ServiceError(message, type=error, metadata=metadata)))
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, message)


# The portal user a call from the portal is made for, resolved from its session (svckit.portal_calls);
# None for every other caller and for the portal's sign-in flows. The token is the session's, for an
# identity call that resolves the user again from it.
portal_user_var: ContextVar[PortalUser | None] = ContextVar("portal_user", default=None)
portal_token_var: ContextVar[str] = ContextVar("portal_token", default="")

# A server's way to resolve a portal session token: its user, None when unknown or ended.
SessionResolver = Callable[[str], Awaitable[PortalUser | None]]


def _session_token(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == SESSION_HEADER and isinstance(value, str):
            return value
    return ""


async def _no_sessions(_token: str) -> PortalUser | None:
    return None


def identity_of(context: grpc.aio.ServicerContext) -> str:
    """The common name of the caller's verified client certificate; "" on a plaintext server."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode() if names else ""


def guard(
    method: str, handler: grpc.RpcMethodHandler, sessions: SessionResolver | None = None
) -> grpc.RpcMethodHandler:
    """``handler`` of ``method`` refusing, with PERMISSION_DENIED, any call whose certificate identity the
    allow list does not permit, and naming the caller in ``caller_var`` while it runs. A call from the
    portal must also carry a session ``sessions`` resolves, of a user who may make it
    (svckit.portal_calls): that user is ``portal_user_var`` while it runs. Built once per method when
    the server registers it (svckit.grpc_server), not per call."""
    permitted = permits(method)
    resolve = sessions or _no_sessions
    # Health and reflection name no account: open to the portal's certificate alone, as to every peer.
    portal_needs_session = needs_session(method) and not method.lstrip("/").startswith(OPEN_TO_EVERY_PEER)

    async def check(context: grpc.aio.ServicerContext, request: Any) -> tuple[str, PortalUser | None, str]:
        identity = identity_of(context)
        if not permitted(identity):
            await refuse(context, identity, method, f"the service {identity!r} may not call {method}")
        if identity != PORTAL or not portal_needs_session:
            return identity, None, ""
        token = _session_token(context)
        user = await resolve(token) if token else None
        descriptor = getattr(request, "DESCRIPTOR", None)  # a client stream's request is an iterator
        fields = descriptor.fields_by_name if descriptor is not None else {}
        refused = refusal(
            method,
            user,
            account_id=request.account_id if "account_id" in fields else None,
            session_token=request.session_token if "session_token" in fields else "",
            token=token,
        )
        if refused is not None:
            await refuse(context, identity, method, refused.message, refused.type)
        return identity, user, token

    def enter(checked: tuple[str, PortalUser | None, str]) -> Callable[[], None]:
        tokens = (
            caller_var.set(checked[0]),
            portal_user_var.set(checked[1]),
            portal_token_var.set(checked[2]),
        )

        def leave() -> None:
            caller_var.reset(tokens[0])
            portal_user_var.reset(tokens[1])
            portal_token_var.reset(tokens[2])

        return leave

    def unary(behavior: Any) -> Any:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            leave = enter(await check(context, request))
            try:
                return await behavior(request, context)
            finally:
                leave()

        return guarded

    def streaming(behavior: Any) -> Any:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            leave = enter(await check(context, request))
            try:
                async for item in behavior(request, context):
                    yield item
            finally:
                leave()

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

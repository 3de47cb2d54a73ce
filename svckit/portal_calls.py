"""What the portal's certificate may call, and on whose behalf: every RPC the portal makes, with what the
signed-in user behind it must be allowed to do; and the decision on one call.

The portal holds a certificate of its own (``portal.pem``), but it never acts for itself: it acts for the
user signed in to it. A certificate alone, stolen from the portal's host or used by a bug, must not create
an owner invite, a key or an audit record in any account it names. So each call carries the user's
session token (gRPC metadata ``x-portal-session``, added by the portal's client once:
svckit.clients.interceptors); the server resolves it (authsvc itself, webhookd through authsvc's
GetSession) and the account, user and role come from that session, never from the request. Only the
sign-in flows need no session: signing in, accepting an invitation, and resolving or ending a session
(whose own token is the request).

A request that names an ``account_id`` must name the session's account; one that carries a
``session_token`` must carry the same session (a second session is refused rather than believed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from svckit import roles

AUTH: Final = "travel.auth.v1.AuthService/"
IDENTITY: Final = "travel.auth.v1.IdentityService/"
HOOKS: Final = "travel.webhooks.v1.WebhookService/"

# The gRPC metadata key of the session token (lower case, as gRPC requires).
SESSION_HEADER: Final = "x-portal-session"

# NO_SESSION: a sign-in flow, allowed on the certificate alone. SESSION: any signed-in user (the identity
# service checks the role itself, per request: inviting as owner needs an owner). Otherwise the action
# the user's role must allow.
NO_SESSION: Final = "no_session"
SESSION: Final = "session"
Need = Literal["no_session", "session"] | roles.Action

# webhookd's reads (its client retries exactly these: they change nothing).
HOOK_READS: tuple[str, ...] = (
    "GetEndpoint",
    "ListEndpoints",
    "ListDeliveries",
    "ListAttempts",
    "GetAttemptStats",
    "ListEvents",
    "GetEvent",
    # The endpoint page's ed25519 public keys (Standard Webhooks v1a).
    "ListSigningKeys",
    # A polling endpoint's queue on its page: waiting, leased, last polled.
    "GetPollStatus",
    # Events of a kind per day (Insights' bookings; the portal's need is account.read, below).
    "CountEvents",
)
_HOOK_WRITES: tuple[str, ...] = (
    "RegisterEndpoint",
    "UpdateEndpoint",
    "DeleteEndpoint",
    "EnableEndpoint",
    "RotateSigningSecret",
    "SendTestEvent",
    "ResendAttempt",
    "RecoverEndpoint",
    "AdvanceSandboxClock",
)

# Every RPC the portal calls (its allow list, svckit.peers) and what the user must be allowed to do.
PORTAL_CALLS: dict[str, Need] = {
    **{IDENTITY + m: NO_SESSION for m in ("SignIn", "AcceptInvite", "GetSession", "SignOut")},
    **{
        IDENTITY + m: SESSION
        for m in (
            "CreateInvite",
            "ListUsers",
            "SetUserRole",
            "RemoveUser",
            "ChangePassword",
            "BeginTotpEnrollment",
            "ConfirmTotpEnrollment",
            "DisableTotp",
            "ListSessions",
            "RevokeSession",
            "SetTotpRequirement",
            "RecordAuditEvent",
        )
    },
    AUTH + "GetAccount": "account.read",
    AUTH + "GetUsage": "account.read",
    # The Insights pages: the account's exact usage counts.
    AUTH + "QueryUsageCounts": "account.read",
    # The Ledger page (mode A credit): read only.
    AUTH + "GetCreditLedger": "account.read",
    AUTH + "ListLedgerEntries": "account.read",
    AUTH + "GetAlertRecipients": "notifications.manage",
    # Its alert addresses only (authsvc refuses any other field from the portal).
    AUTH + "UpdateAccount": "notifications.manage",
    AUTH + "CreateKey": "keys.write",
    AUTH + "GetKey": "keys.read",
    AUTH + "ListKeys": "keys.read",
    AUTH + "UpdateKey": "keys.write",
    AUTH + "RotateKey": "keys.write",
    AUTH + "RevokeKey": "keys.revoke",
    AUTH + "ListAuditEvents": "audit.read",
    AUTH + "ListRequests": "keys.read",
    # The Go-live checklist (portal.routes.golive): the account's runs, and starting one.
    AUTH + "GetCertificationRun": "keys.read",
    AUTH + "StartCertificationRun": "keys.write",
    AUTH + "FinishCertificationRun": "keys.write",
    **{HOOKS + m: "webhooks.read" for m in HOOK_READS},
    **{HOOKS + m: "webhooks.write" for m in _HOOK_WRITES},
    # Insights' look-to-book: confirmed bookings per day (an account figure, like GetUsage).
    HOOKS + "CountEvents": "account.read",
    # Insights' webhooks page: delivery counts per endpoint.
    HOOKS + "QueryDeliveryCounts": "webhooks.read",
}

# What the portal may change of an account (UpdateAccount's update_mask paths).
PORTAL_ACCOUNT_FIELDS: Final = frozenset({"admin_emails"})


@dataclass(frozen=True)
class PortalUser:
    """The signed-in portal user a call is made for, as the server resolved its session."""

    account_id: str
    user_id: str
    email: str
    role: str
    session_id: str
    # Where the session was opened (the browser's address), for the audit trail's actor.
    source_address: str = ""


@dataclass(frozen=True)
class Refusal:
    type: Literal["session_expired", "forbidden"]
    message: str


def needs_session(method: str) -> bool:
    """Does a call of ``method`` (``/package.Service/Method``) from the portal need a signed-in user?
    A method the table does not list needs one (the allow list refuses it anyway)."""
    return PORTAL_CALLS.get(method.lstrip("/"), SESSION) != NO_SESSION


def refusal(
    method: str,
    user: PortalUser | None,
    *,
    account_id: str | None = None,
    session_token: str = "",
    token: str = "",
) -> Refusal | None:
    """Why a call of ``method`` from the portal's certificate is refused, None when it may run.

    ``user``: the session of the call's metadata ``token`` resolved (None: none, unknown or ended);
    ``account_id``: the request's (None when its message has no such field); ``session_token``: the
    request's own session token field, if any.
    """
    need = PORTAL_CALLS.get(method.lstrip("/"))
    if need is None:
        return Refusal("forbidden", f"the portal may not call {method.lstrip('/')}")
    if need == NO_SESSION:
        return None
    if user is None:
        return Refusal("session_expired", "session: the portal calls on behalf of a signed-in user only")
    if session_token and session_token != token:
        return Refusal("forbidden", "session_token: not the session the call is made for")
    if account_id and account_id != user.account_id:
        return Refusal("forbidden", "account_id: not the signed-in user's account")
    if need != SESSION and not roles.allowed(user.role, need):
        return Refusal("forbidden", f"the {user.role} role may not do {need}")
    return None

"""The typed contexts: ``PortalContext`` of the app (``request.app.ctx``) and ``RequestContext`` of a
request (``request.ctx``), with the signed-in ``Viewer``; handlers take a ``PortalRequest`` and reach the
peers through ``auth(request)`` (authsvc) and ``hooks(request)`` (webhookd)."""

from __future__ import annotations

from contextvars import Token
from dataclasses import dataclass, field
from types import SimpleNamespace

from sanic import Request, Sanic
from sanic.config import Config

from portal.config import PortalConfig
from portal.flash import Spent
from svckit import roles
from svckit.clients import AuthClient, HooksClient
from svckit.pacing import RefusalPacer
from svckit.prototables import USER_ROLE
from travel.auth.v1 import identity_pb2 as ipb


@dataclass
class PortalContext:
    # The object __main__ completes (public_url, once the port is bound): read it per request. Not
    # named config: edge.server takes app.ctx.config of any app it serves for an EdgeConfig.
    settings: PortalConfig
    # The clients of authsvc (AuthService and IdentityService) and webhookd; a gRPC error of either
    # is a svckit.clients.ClientError.
    auth: AuthClient
    hooks: HooksClient
    csrf_key: bytes
    # The key of the one-time flashes (portal.flash), derived from csrf_key.
    flash_key: bytes
    # Cookies carry Secure when partners open the portal over https.
    secure: bool
    # Refusals past their source's allowance are held (svckit.pacing): a flood is answered slowly.
    pacer: RefusalPacer
    # The one-time secret cookies this process has shown (portal.flash.Spent): never shown twice.
    spent: Spent = field(default_factory=Spent)


@dataclass
class Viewer:
    """The signed-in portal user of a request."""

    user: ipb.User
    session_token: str
    # authsvc's id of the session (ses_...): what the CSRF token of a signed-in form is bound to.
    session_id: str
    # The account requires TOTP of owners and admins and this one has none: it may only enrol.
    enrolment_required: bool = False
    account_requires_totp: bool = False
    role: str = field(init=False)

    def __post_init__(self) -> None:
        self.role = USER_ROLE.get(self.user.role)

    def can(self, action: roles.Action) -> bool:
        return roles.allowed(self.role, action)


@dataclass
class RequestContext(SimpleNamespace):  # SimpleNamespace: the bound of Sanic's request context type
    rid: str = ""
    token: Token[str | None] | None = None
    # The reset of svckit.clients' session_token_var: the session every call of this request carries.
    session_token: Token[str] | None = None
    # A CSRF nonce made for this browser, set as its cookie on the response.
    new_csrf: str = ""
    viewer: Viewer | None = None
    started: float | None = None
    # Flash cookies this answer showed, deleted with it: (name, path).
    drop_cookies: list[tuple[str, str]] = field(default_factory=list)


PortalApp = Sanic[Config, PortalContext]


class PortalRequest(Request[PortalApp, RequestContext]):
    @staticmethod
    def make_context() -> RequestContext:
        return RequestContext()


def auth(request: PortalRequest) -> AuthClient:
    """The client of authsvc: ``await auth(request).get_key(apb.GetKeyRequest(...))``."""
    return request.app.ctx.auth


def hooks(request: PortalRequest) -> HooksClient:
    """The client of webhookd: ``await hooks(request).list_endpoints(wpb.ListEndpointsRequest(...))``."""
    return request.app.ctx.hooks

"""The portal's routes. Pages live under /<env>/ (live or sandbox) so the environment is in every URL
and the switch is a link; every POST is CSRF-checked and role-checked before any gRPC call."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import pathlib
import re
import smtplib
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, cast

import pyotp
import qrcode
import qrcode.image.svg
from google.protobuf import duration_pb2, field_mask_pb2, struct_pb2, timestamp_pb2
from markupsafe import Markup
from prometheus_client import Counter
from sanic import Request, Sanic, response
from sanic.response import HTTPResponse

from portal import charts
from portal.peers import Peers, PortalError
from portal.web import (
    ENVIRONMENTS,
    ROLE_NAMES,
    ROLE_VALUES,
    SESSION_COOKIE,
    RouteErrorHandler,
    Viewer,
    begin,
    check_csrf,
    error_page,
    finish,
    need,
    render,
    set_cookie,
)
from svckit.allowlist import validate_allowlist
from svckit.errors import InvalidInput
from svckit.events import EVENT_KINDS
from svckit.protos import datetime_of, struct, struct_to_dict, timestamp
from svckit.scopes import ALL_SCOPES
from svckit.tls import Tls
from svckit.webhook_status import DeliveryStatus, proto_values
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb

log = logging.getLogger("portal")
AUDIT_FAILURES = Counter(
    "portal_audit_failures_total", "Webhook operations done whose audit record authsvc did not take"
)
ROOT = pathlib.Path(__file__).resolve().parent.parent
STATIC = pathlib.Path(__file__).resolve().parent / "static"
HTMX = ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js"
PUBLIC = ("/signin", "/invite/", "/static/", "/healthz")
PAGE_SIZE = 25
# What a user who must enrol in TOTP may still open: its own page, the enrolment, sign-out.
ENROLMENT_PATH = re.compile(r"^/(live|sandbox)/me(/totp|/totp-confirm)?$|^/signout$")
ENV_PB = {"live": apb.ENVIRONMENT_LIVE, "sandbox": apb.ENVIRONMENT_SANDBOX}
WENV_PB = {"live": wpb.ENVIRONMENT_LIVE, "sandbox": wpb.ENVIRONMENT_SANDBOX}
KEY_STATUS = {1: "active", 2: "expiring", 3: "expired", 4: "revoked"}
DELIVERY_STATUS = proto_values(DeliveryStatus, wpb.DeliveryStatus, "DELIVERY_STATUS_")
DELIVERY_STATUS_PB = {name: value for value, name in DELIVERY_STATUS.items()}
OUTCOME = {1: "succeeded", 2: "http error", 3: "timeout", 4: "network error"}


@dataclass
class PortalConfig:
    authsvc: str = "127.0.0.1:50051"
    webhookd: str = "127.0.0.1:50052"
    public_url: str = "http://127.0.0.1:8090"
    smtp_host: str = ""
    smtp_port: int = 25
    mail_from: str = "portal@svc.travel"
    # Mutual TLS to authsvc and webhookd as "portal" (svckit.tls); None is plaintext (--insecure-dev).
    tls: Tls | None = field(default=None, repr=False)
    # The key of the CSRF tokens (portal.csrf); None makes a random one for this process.
    csrf_key: bytes | None = field(default=None, repr=False)


def _when(text: str, field: str) -> timestamp_pb2.Timestamp | None:
    if not text:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise PortalError(
            400, "invalid_request", "expected a date and time like 2026-11-23T10:00", field
        ) from None
    return timestamp(parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC))


def _fmt(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _countdown(value: dt.datetime | None) -> str:
    if value is None:
        return ""
    left = int((value - dt.datetime.now(dt.UTC)).total_seconds())
    if left <= 0:
        return "expired"
    hours, rest = divmod(left, 3600)
    return f"expires in {hours} h {rest // 60} min"


def _details(value: struct_pb2.Struct) -> str:
    """An audit record's before or after as compact JSON (whole numbers without ".0")."""
    return json.dumps(struct_to_dict(value), ensure_ascii=False, sort_keys=True) if value.fields else ""


def _endpoint_fields(endpoint: wpb.Endpoint) -> dict[str, Any]:
    """What the audit trail records of an endpoint (never its signing secret, which it does not hold)."""
    return {"url": endpoint.url, "events": list(endpoint.events), "description": endpoint.description}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]


class Fields:
    """Form fields as strings ("" when absent)."""

    def __init__(self, request: Request) -> None:
        self._form: Any = request.form or {}

    def get(self, name: str, default: str = "") -> str:
        value = self._form.get(name)
        return default if value is None else str(value)

    def getlist(self, name: str) -> list[str]:
        getlist = getattr(self._form, "getlist", None)
        return [str(v) for v in (getlist(name) or [])] if getlist else []


def _period_seconds(form: Fields, name: str) -> int:
    """A key's grace or a signing secret's overlap, asked for in hours (default 24, at most 7 days)."""
    try:
        hours = float(form.get(name, "24"))
    except ValueError:
        hours = -1
    if not 0 <= hours <= 168:
        raise PortalError(400, "invalid_request", "choose between 0 and 168 hours (7 days)", name)
    return int(hours * 3600)


def role_of(name: str) -> Any:
    return ROLE_VALUES.get(name, ipb.USER_ROLE_UNSPECIFIED)


def fields(request: Request) -> Fields:
    return Fields(request)


def create_app(config: PortalConfig, name: str = "portal") -> Sanic:
    app = Sanic(name, error_handler=RouteErrorHandler())
    app.config.KEEP_ALIVE_TIMEOUT = 30
    peers = Peers(config.authsvc, config.webhookd, config.tls)
    secure = config.public_url.startswith("https://")
    app.ctx.peers = peers
    app.ctx.csrf_key = config.csrf_key or os.urandom(32)
    if config.csrf_key is None:
        log.warning(
            "no --csrf-key-file / PORTAL_CSRF_KEY: CSRF tokens use a key of this process only, so forms "
            "opened before a restart (or served by another portal process) are refused once"
        )
    filters: dict[str, Any] = {"fmt": _fmt, "countdown": _countdown, "ts": datetime_of, "details": _details}

    from portal.web import templates

    templates.filters.update(filters)
    templates.globals.update(
        KEY_STATUS=KEY_STATUS, DELIVERY_STATUS=DELIVERY_STATUS, OUTCOME=OUTCOME, ROLE_NAMES=ROLE_NAMES
    )

    def actor(request: Request) -> apb.Actor:
        viewer: Viewer = request.ctx.viewer
        return apb.Actor(user=viewer.user.email, source_address=request.ip or "", user_id=viewer.user.id)

    def env_of(request: Request) -> str:
        env = request.match_info.get("env", "live")
        if env not in ENVIRONMENTS:
            raise PortalError(404, "not_found", "No such page.")
        return str(env)

    @app.on_request
    async def load(request: Request) -> HTTPResponse | None:
        begin(request)
        if request.path.startswith(PUBLIC) or request.path == "/":
            token = request.cookies.get(SESSION_COOKIE)
            if request.path == "/" and not token:
                return response.redirect("/signin")
            if request.path == "/":
                return response.redirect("/live/")
            return None
        token = request.cookies.get(SESSION_COOKIE) or ""
        try:
            got = await peers.call(peers.identity.GetSession, ipb.GetSessionRequest(session_token=token))
        except PortalError as exc:
            if exc.status == 401:
                if request.method == "GET" and not request.headers.get("hx-request"):
                    return response.redirect("/signin")
                raise PortalError(401, "session_expired", "Your session has ended; sign in again.") from None
            raise
        request.ctx.viewer = Viewer(
            got.user, token, got.session.id, got.totp_enrolment_required, got.account_requires_totp
        )
        if request.method not in ("GET", "HEAD"):
            check_csrf(request)
        if got.totp_enrolment_required and not ENROLMENT_PATH.match(request.path):
            if request.method == "GET":
                env = request.path.split("/")[1]
                return response.redirect(f"/{env if env in ENVIRONMENTS else 'live'}/me", status=303)
            raise PortalError(403, "forbidden", "Your account requires two-factor sign-in: set it up first.")
        return None

    @app.on_response
    async def headers(request: Request, resp: HTTPResponse) -> None:
        finish(request, resp, secure)

    @app.exception(PortalError)
    async def portal_error(request: Request, exc: PortalError) -> HTTPResponse:
        if not hasattr(request.ctx, "rid"):
            begin(request)
        return error_page(request, exc)

    @app.after_server_stop
    async def close(app: Sanic) -> None:
        await peers.close()

    # -- static, health --------------------------------------------------------------------------

    @app.get("/static/<name:str>")
    async def static(request: Request, name: str) -> HTTPResponse:
        files = {
            "portal.css": (STATIC / "portal.css", "text/css"),
            "portal.js": (STATIC / "portal.js", "text/javascript"),
            "htmx.min.js": (HTMX, "text/javascript"),
        }
        if name not in files:
            raise PortalError(404, "not_found", "No such file.")
        path, mime = files[name]
        resp = response.raw(path.read_bytes(), content_type=mime)
        resp.headers["Cache-Control"] = "public, max-age=300"
        return resp

    @app.get("/healthz")
    async def healthz(request: Request) -> HTTPResponse:
        return response.json({"status": "ok"})

    # -- sign-in ---------------------------------------------------------------------------------

    def signed_in(request: Request, token: str, to: str = "/live/") -> HTTPResponse:
        resp = response.redirect(to, status=303)
        set_cookie(resp, SESSION_COOKIE, token, secure)
        return resp

    @app.get("/signin")
    async def signin_form(request: Request) -> HTTPResponse:
        return render(request, "signin.html", email="", need_totp=False)

    @app.post("/signin")
    async def signin(request: Request) -> HTTPResponse:
        check_csrf(request)
        form = fields(request)
        email = form.get("email", "")
        try:
            got = await peers.call(
                peers.identity.SignIn,
                ipb.SignInRequest(
                    email=email,
                    password=form.get("password", ""),
                    totp_code=form.get("totp_code", ""),
                    source_address=request.ip or "",
                    user_agent=request.headers.get("user-agent", "")[:300],
                ),
            )
        except PortalError as exc:
            if exc.status in (400, 401, 429):
                need_totp = exc.type == "second_factor_required"
                errors = {"totp_code" if need_totp else "form": exc.message}
                return render(
                    request, "signin.html", status=exc.status, email=email, need_totp=need_totp, errors=errors
                )
            raise
        # A fresh session id on every sign-in; an old cookie is simply replaced.
        old = request.cookies.get(SESSION_COOKIE)
        if old:
            await peers.call(peers.identity.SignOut, ipb.SignOutRequest(session_token=old))
        return signed_in(request, got.session_token)

    @app.post("/signout")
    async def signout(request: Request) -> HTTPResponse:
        await peers.call(
            peers.identity.SignOut, ipb.SignOutRequest(session_token=request.ctx.viewer.session_token)
        )
        resp = response.redirect("/signin", status=303)
        resp.delete_cookie(SESSION_COOKIE, path="/")
        return resp

    @app.get("/invite/<token:str>")
    async def invite_form(request: Request, token: str) -> HTTPResponse:
        return render(request, "invite.html", token=token)

    @app.post("/invite/<token:str>")
    async def invite_accept(request: Request, token: str) -> HTTPResponse:
        check_csrf(request)
        try:
            got = await peers.call(
                peers.identity.AcceptInvite,
                ipb.AcceptInviteRequest(
                    token=token,
                    password=fields(request).get("password", ""),
                    source_address=request.ip or "",
                    user_agent=request.headers.get("user-agent", "")[:300],
                ),
            )
        except PortalError as exc:
            if exc.status in (400, 401, 409):
                return render(
                    request,
                    "invite.html",
                    status=exc.status,
                    token=token,
                    errors={exc.field or "form": exc.message},
                )
            raise
        return signed_in(request, got.session_token)

    async def listing(
        request: Request,
        template: str,
        items: str,
        method: Any,
        make: Callable[[], Any],
        status: int = 200,
        **extra: Any,
    ) -> HTTPResponse:
        """A paginated list page: ``items`` is the response's repeated field; a refused filter (400) is
        shown beside its field over an empty list."""
        try:
            page = await peers.call(method, make())
        except PortalError as exc:
            if exc.status != 400:
                raise
            errors = {exc.field or "form": exc.message, **extra.pop("errors", {})}
            return render(request, template, status=400, next_page="", errors=errors, **{items: []}, **extra)
        return render(
            request,
            template,
            status=status,
            next_page=page.next_page_token,
            **{items: list(getattr(page, items))},
            **extra,
        )

    # -- overview --------------------------------------------------------------------------------

    @app.get("/<env:str>/")
    async def overview(request: Request, env: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "account.read")
        account_id = viewer.user.account_id
        now = dt.datetime.now(dt.UTC)
        # Three calls at once (authsvc twice, webhookd once: both windows in one pass).
        account, usage, stats = await asyncio.gather(
            peers.call(peers.auth.GetAccount, apb.GetAccountRequest(account_id=account_id)),
            peers.call(peers.auth.GetUsage, apb.GetUsageRequest(account_id=account_id)),
            peers.call(
                peers.webhooks.GetAttemptStats,
                wpb.GetAttemptStatsRequest(
                    account_id=account_id,
                    environment=WENV_PB[env],
                    since=timestamp(now - dt.timedelta(days=30)),
                    recent_since=timestamp(now - dt.timedelta(hours=24)),
                ),
            ),
        )
        day = (int(stats.recent_succeeded), int(stats.recent_attempts))
        month = (int(stats.succeeded), int(stats.attempts))
        u = usage.usage
        return render(
            request,
            "overview.html",
            account=account.account,
            usage_bar=charts.usage_bar(u.searches_used, u.daily_search_allowance),
            rates=charts.success_rates([("24 h", *day), ("30 d", *month)]),
            read_only=account.account.status == apb.ACCOUNT_STATUS_READ_ONLY,
        )

    # -- keys ------------------------------------------------------------------------------------

    async def keys_page(request: Request, env: str, status: int = 200, **extra: Any) -> HTTPResponse:
        viewer = need(request, "keys.read")
        extra.setdefault("form", {})
        return await listing(
            request,
            "keys.html",
            "keys",
            peers.auth.ListKeys,
            lambda: apb.ListKeysRequest(
                account_id=viewer.user.account_id,
                environment=ENV_PB[env],
                include_revoked=True,
                page_size=PAGE_SIZE,
                page_token=request.args.get("page", ""),
            ),
            status,
            scopes=ALL_SCOPES,
            **extra,
        )

    @app.get("/<env:str>/keys")
    async def keys(request: Request, env: str) -> HTTPResponse:
        return await keys_page(request, env_of(request))

    @app.post("/<env:str>/keys/validate-sources")
    async def validate_sources(request: Request, env: str) -> HTTPResponse:
        need(request, "keys.write")
        try:
            validate_allowlist(_lines(fields(request).get("allowed_sources", "")))
        except InvalidInput as exc:
            return response.html(f'<span class="field-error">{Markup.escape(exc.message)}</span>')
        return response.html('<span class="field-ok">✓ valid</span>')

    @app.post("/<env:str>/keys")
    async def create_key(request: Request, env: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "keys.write")
        form = fields(request)
        scopes = form.getlist("scopes")
        sources = _lines(form.get("allowed_sources", ""))
        try:
            created = await peers.call(
                peers.auth.CreateKey,
                apb.CreateKeyRequest(
                    account_id=viewer.user.account_id,
                    environment=ENV_PB[env],
                    name=form.get("name", ""),
                    scopes=scopes,
                    allowed_sources=sources,
                    actor=actor(request),
                ),
            )
        except PortalError as exc:
            if exc.status != 400:
                raise
            values = {"name": form.get("name", ""), "scopes": scopes, "allowed_sources": "\n".join(sources)}
            return await keys_page(request, env, 400, errors={exc.field or "form": exc.message}, form=values)
        return render(request, "secret.html", title="API key created", key=created.key, secret=created.secret)

    async def get_key(request: Request, key_id: str) -> apb.ApiKey:
        key = (await peers.call(peers.auth.GetKey, apb.GetKeyRequest(key_id=key_id))).key
        if key.account_id != request.ctx.viewer.user.account_id:
            raise PortalError(404, "not_found", "No such key.")
        return key

    @app.get("/<env:str>/keys/<key_id:str>")
    async def key_page(request: Request, env: str, key_id: str) -> HTTPResponse:
        need(request, "keys.read")
        return render(request, "key.html", key=await get_key(request, key_id))

    @app.post("/<env:str>/keys/<key_id:str>/rotate")
    async def rotate_key(request: Request, env: str, key_id: str) -> HTTPResponse:
        need(request, "keys.write")
        key = await get_key(request, key_id)
        try:
            grace = _period_seconds(fields(request), "grace_hours")
        except PortalError as exc:
            return render(request, "key.html", status=400, key=key, errors={exc.field: exc.message})
        rotated = await peers.call(
            peers.auth.RotateKey,
            apb.RotateKeyRequest(
                key_id=key.id,
                grace_period=duration_pb2.Duration(seconds=grace),
                actor=actor(request),
            ),
        )
        return render(
            request,
            "secret.html",
            title="API key rotated",
            key=rotated.new_key,
            secret=rotated.secret,
            old_key=rotated.old_key,
        )

    @app.post("/<env:str>/keys/<key_id:str>/revoke")
    async def revoke_key(request: Request, env: str, key_id: str) -> HTTPResponse:
        need(request, "keys.revoke")
        key = await get_key(request, key_id)
        form = fields(request)
        if form.get("confirm", "").strip() != key.name and form.get("confirm", "").strip() != key.hint:
            return render(
                request,
                "key.html",
                status=400,
                key=key,
                errors={"confirm": "type the key's name exactly to confirm"},
            )
        await peers.call(
            peers.auth.RevokeKey,
            apb.RevokeKeyRequest(key_id=key.id, reason=form.get("reason", ""), actor=actor(request)),
        )
        return response.redirect(f"/{env}/keys/{key.id}", status=303)

    # -- audit -----------------------------------------------------------------------------------

    @app.get("/<env:str>/audit")
    async def audit(request: Request, env: str) -> HTTPResponse:
        viewer = need(request, "audit.read")
        a = request.args
        q = {k: a.get(k, "") for k in ("key_id", "user_id", "action", "since", "until")}
        return await listing(
            request,
            "audit.html",
            "events",
            peers.auth.ListAuditEvents,
            lambda: apb.ListAuditEventsRequest(
                account_id=viewer.user.account_id,
                key_id=q["key_id"],
                actor_user_id=q["user_id"],
                action=q["action"],
                since=_when(q["since"], "since"),
                until=_when(q["until"], "until"),
                page_size=PAGE_SIZE,
                page_token=a.get("page", ""),
            ),
            q=q,
        )

    # -- webhook endpoints -----------------------------------------------------------------------

    async def endpoints_page(request: Request, env: str, status: int = 200, **extra: Any) -> HTTPResponse:
        viewer = need(request, "webhooks.read")
        extra.setdefault("form", {})
        return await listing(
            request,
            "webhooks.html",
            "endpoints",
            peers.webhooks.ListEndpoints,
            lambda: wpb.ListEndpointsRequest(
                account_id=viewer.user.account_id,
                environment=WENV_PB[env],
                page_size=PAGE_SIZE,
                page_token=request.args.get("page", ""),
            ),
            status,
            kinds=EVENT_KINDS,
            **extra,
        )

    @app.get("/<env:str>/webhooks")
    async def webhooks(request: Request, env: str) -> HTTPResponse:
        return await endpoints_page(request, env_of(request))

    @app.post("/<env:str>/webhooks")
    async def create_endpoint(request: Request, env: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "webhooks.write")
        form = fields(request)
        events = form.getlist("events")
        try:
            made = await peers.call(
                peers.webhooks.RegisterEndpoint,
                wpb.RegisterEndpointRequest(
                    account_id=viewer.user.account_id,
                    environment=WENV_PB[env],
                    url=form.get("url", ""),
                    events=events,
                    description=form.get("description", ""),
                ),
            )
        except PortalError as exc:
            if exc.status != 400:
                raise
            values = {
                "url": form.get("url", ""),
                "events": events,
                "description": form.get("description", ""),
            }
            return await endpoints_page(
                request, env, 400, errors={exc.field or "form": exc.message}, form=values
            )
        await audit_webhook(
            request, "webhook_endpoint.created", made.endpoint.id, after=_endpoint_fields(made.endpoint)
        )
        return render(
            request, "endpoint.html", endpoint=made.endpoint, secret=made.signing_secret, kinds=EVENT_KINDS
        )

    def endpoint_ref(request: Request, env: str, endpoint_id: str) -> dict[str, Any]:
        return {
            "account_id": request.ctx.viewer.user.account_id,
            "environment": WENV_PB[env],
            "endpoint_id": endpoint_id,
        }

    async def audit_webhook(
        request: Request,
        action: str,
        endpoint_id: str,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
    ) -> None:
        """Records a webhook operation webhookd has just done in the account's audit trail. authsvc names
        the actor from the session (the signed-in user), never from what the portal says."""
        env = env_of(request)
        target = {"endpoint_id": endpoint_id, "environment": env}
        try:
            await peers.call(
                peers.identity.RecordAuditEvent,
                ipb.RecordAuditEventRequest(
                    session_token=request.ctx.viewer.session_token,
                    action=action,
                    before=struct(before or {}),
                    after=struct({**target, **(after or {})}),
                    source_address=request.ip or "",
                ),
            )
        except PortalError as exc:
            # The change is made: answering an error now would invite making it twice.
            AUDIT_FAILURES.inc()
            log.error(
                "audit record failed", extra={"action": action, "endpoint_id": endpoint_id, "error": exc.type}
            )

    @app.get("/<env:str>/webhooks/<endpoint_id:str>")
    async def endpoint_page(request: Request, env: str, endpoint_id: str) -> HTTPResponse:
        need(request, "webhooks.read")
        got = await peers.call(
            peers.webhooks.GetEndpoint, wpb.GetEndpointRequest(**endpoint_ref(request, env, endpoint_id))
        )
        return render(request, "endpoint.html", endpoint=got.endpoint, kinds=EVENT_KINDS)

    @app.post("/<env:str>/webhooks/<endpoint_id:str>/<action:str>")
    async def endpoint_action(request: Request, env: str, endpoint_id: str, action: str) -> HTTPResponse:
        env = env_of(request)
        need(request, "webhooks.write")
        ref = endpoint_ref(request, env, endpoint_id)
        form = fields(request)
        back = response.redirect(f"/{env}/webhooks/{endpoint_id}", status=303)
        try:
            if action == "edit":
                events = form.getlist("events")
                mask = field_mask_pb2.FieldMask(paths=["url", "events", "description"])
                old = await peers.call(peers.webhooks.GetEndpoint, wpb.GetEndpointRequest(**ref))
                new = await peers.call(
                    peers.webhooks.UpdateEndpoint,
                    wpb.UpdateEndpointRequest(
                        **ref,
                        update_mask=mask,
                        url=form.get("url", ""),
                        events=events,
                        description=form.get("description", ""),
                    ),
                )
                before, after = _endpoint_fields(old.endpoint), _endpoint_fields(new.endpoint)
                changed = [name for name in before if before[name] != after[name]]
                await audit_webhook(
                    request,
                    "webhook_endpoint.updated",
                    endpoint_id,
                    before={name: before[name] for name in changed},
                    after={name: after[name] for name in changed},
                )
            elif action == "delete":
                gone = await peers.call(peers.webhooks.DeleteEndpoint, wpb.DeleteEndpointRequest(**ref))
                await audit_webhook(
                    request, "webhook_endpoint.deleted", endpoint_id, before=_endpoint_fields(gone.endpoint)
                )
                return response.redirect(f"/{env}/webhooks", status=303)
            elif action == "enable":
                await peers.call(peers.webhooks.EnableEndpoint, wpb.EnableEndpointRequest(**ref))
                await audit_webhook(
                    request, "webhook_endpoint.enabled", endpoint_id, after={"status": "enabled"}
                )
            elif action == "recover":
                since = _when(form.get("since", ""), "since") or timestamp(
                    dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
                )
                recovered = await peers.call(
                    peers.webhooks.RecoverEndpoint, wpb.RecoverEndpointRequest(**ref, since=since)
                )
                await audit_webhook(
                    request,
                    "webhook_endpoint.recovered",
                    endpoint_id,
                    after={"since": _fmt(datetime_of(since)), "recovered": recovered.recovered_count},
                )
            elif action == "test":
                sent = await peers.call(peers.webhooks.SendTestEvent, wpb.SendTestEventRequest(**ref))
                await audit_webhook(
                    request,
                    "webhook_endpoint.test_sent",
                    endpoint_id,
                    after={"event_id": sent.event.id, "delivery_id": sent.delivery.id},
                )
                return response.redirect(f"/{env}/deliveries/{sent.delivery.id}", status=303)
            elif action == "rotate":
                overlap = _period_seconds(form, "overlap_hours")
                rotated = await peers.call(
                    peers.webhooks.RotateSigningSecret,
                    wpb.RotateSigningSecretRequest(**ref, overlap=duration_pb2.Duration(seconds=overlap)),
                )
                # The new secret is shown below, once; the record says only that it changed.
                await audit_webhook(
                    request,
                    "webhook_endpoint.secret_rotated",
                    endpoint_id,
                    after={
                        "overlap_seconds": overlap,
                        "old_signatures_until": _fmt(
                            datetime_of(rotated.endpoint.previous_secret_expires_at)
                        ),
                    },
                )
                return render(
                    request,
                    "endpoint.html",
                    endpoint=rotated.endpoint,
                    secret=rotated.signing_secret,
                    kinds=EVENT_KINDS,
                )
            else:
                raise PortalError(404, "not_found", "No such action.")
        except PortalError as exc:
            if exc.status != 400:
                raise
            got = await peers.call(peers.webhooks.GetEndpoint, wpb.GetEndpointRequest(**ref))
            return render(
                request,
                "endpoint.html",
                status=400,
                endpoint=got.endpoint,
                kinds=EVENT_KINDS,
                errors={exc.field or "form": exc.message},
            )
        return back

    # -- delivery log ----------------------------------------------------------------------------

    @app.get("/<env:str>/deliveries")
    async def deliveries(request: Request, env: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "webhooks.read")
        a = request.args
        q = {k: a.get(k, "") for k in ("endpoint_id", "event_kind", "status", "since", "until")}
        default_since = timestamp(dt.datetime.now(dt.UTC) - dt.timedelta(days=30))
        return await listing(
            request,
            "deliveries.html",
            "deliveries",
            peers.webhooks.ListDeliveries,
            lambda: wpb.ListDeliveriesRequest(
                account_id=viewer.user.account_id,
                environment=WENV_PB[env],
                endpoint_id=q["endpoint_id"],
                event_type=q["event_kind"],
                status=cast(Any, DELIVERY_STATUS_PB.get(q["status"], 0)),
                since=_when(q["since"], "since") or default_since,
                until=_when(q["until"], "until"),
                page_size=PAGE_SIZE,
                page_token=a.get("page", ""),
            ),
            q=q,
            kinds=EVENT_KINDS,
        )

    async def attempts_of(request: Request, env: str, delivery_id: str) -> list[wpb.Attempt]:
        page = await peers.call(
            peers.webhooks.ListAttempts,
            wpb.ListAttemptsRequest(
                account_id=request.ctx.viewer.user.account_id,
                environment=WENV_PB[env],
                delivery_id=delivery_id,
                page_size=100,
            ),
        )
        return sorted(page.attempts, key=lambda x: x.attempt_number)

    @app.get("/<env:str>/deliveries/<delivery_id:str>")
    async def delivery_page(request: Request, env: str, delivery_id: str) -> HTTPResponse:
        env = env_of(request)
        need(request, "webhooks.read")
        attempts = await attempts_of(request, env, delivery_id)
        if request.headers.get("hx-request"):
            return render(request, "_attempts.html", attempts=attempts, delivery_id=delivery_id)
        return render(request, "delivery.html", attempts=attempts, delivery_id=delivery_id)

    @app.post("/<env:str>/attempts/<attempt_id:str>/resend")
    async def resend(request: Request, env: str, attempt_id: str) -> HTTPResponse:
        env = env_of(request)
        need(request, "webhooks.write")
        got = await peers.call(
            peers.webhooks.ResendAttempt,
            wpb.ResendAttemptRequest(
                account_id=request.ctx.viewer.user.account_id, environment=WENV_PB[env], attempt_id=attempt_id
            ),
        )
        await audit_webhook(
            request,
            "webhook_attempt.resent",
            got.delivery.endpoint_id,
            after={
                "attempt_id": attempt_id,
                "delivery_id": got.delivery.id,
                "event_id": got.delivery.event_id,
            },
        )
        attempts = await attempts_of(request, env, got.delivery.id)
        return render(
            request,
            "_attempts.html",
            status=202,
            attempts=attempts,
            delivery_id=got.delivery.id,
            polling=True,
        )

    # -- users -----------------------------------------------------------------------------------

    async def users_page(request: Request, status: int = 200, **extra: Any) -> HTTPResponse:
        viewer = need(request, "users.read")
        return await listing(
            request,
            "users.html",
            "users",
            peers.identity.ListUsers,
            lambda: ipb.ListUsersRequest(
                session_token=viewer.session_token,
                page_size=PAGE_SIZE,
                page_token=request.args.get("page", ""),
            ),
            status,
            roles=list(ROLE_VALUES),
            **extra,
        )

    @app.get("/<env:str>/users")
    async def users(request: Request, env: str) -> HTTPResponse:
        env_of(request)
        return await users_page(request)

    def send_invite(email: str, link: str, inviter: str) -> None:
        msg = EmailMessage()
        msg["From"] = config.mail_from
        msg["To"] = email
        msg["Subject"] = "You are invited to the svc partner portal"
        msg.set_content(
            f"{inviter} invited you to the svc partner portal.\n\nSet your password here "
            f"(the link works once, for 7 days):\n{link}\n"
        )
        with smtplib.SMTP(config.smtp_host, config.smtp_port, timeout=15) as smtp:
            smtp.send_message(msg)

    @app.post("/<env:str>/users/security")
    async def security(request: Request, env: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "account.security")
        await peers.call(
            peers.identity.SetTotpRequirement,
            ipb.SetTotpRequirementRequest(
                session_token=viewer.session_token,
                required=fields(request).get("require_totp") == "on",
                source_address=request.ip or "",
            ),
        )
        return response.redirect(f"/{env}/users", status=303)

    @app.post("/<env:str>/users/invite")
    async def invite(request: Request, env: str) -> HTTPResponse:
        viewer = need(request, "users.manage")
        email = fields(request).get("email", "")
        role = role_of(fields(request).get("role"))
        try:
            made = await peers.call(
                peers.identity.CreateInvite,
                ipb.CreateInviteRequest(
                    email=email,
                    role=role,
                    session_token=viewer.session_token,
                    actor=apb.Actor(user=viewer.user.email, source_address=request.ip or ""),
                ),
            )
        except PortalError as exc:
            if exc.status not in (400, 403, 409):
                raise
            return await users_page(request, exc.status, errors={exc.field or "form": exc.message})
        link = f"{config.public_url.rstrip('/')}/invite/{made.token}"
        if config.smtp_host:
            await asyncio.to_thread(send_invite, made.invite.email, link, viewer.user.email)
            return await users_page(request, notice=f"Invitation sent to {made.invite.email}.")
        return await users_page(
            request,
            notice=f"No mail server is configured; give {made.invite.email} this "
            f"link (it works once): {link}",
        )

    @app.post("/<env:str>/users/<user_id:str>/<action:str>")
    async def user_action(request: Request, env: str, user_id: str, action: str) -> HTTPResponse:
        env = env_of(request)
        viewer = need(request, "users.manage")
        try:
            if action == "role":
                await peers.call(
                    peers.identity.SetUserRole,
                    ipb.SetUserRoleRequest(
                        session_token=viewer.session_token,
                        user_id=user_id,
                        role=role_of(fields(request).get("role")),
                        source_address=request.ip or "",
                    ),
                )
            elif action == "remove":
                await peers.call(
                    peers.identity.RemoveUser,
                    ipb.RemoveUserRequest(
                        session_token=viewer.session_token, user_id=user_id, source_address=request.ip or ""
                    ),
                )
            else:
                raise PortalError(404, "not_found", "No such action.")
        except PortalError as exc:
            if exc.status not in (400, 403, 409):
                raise
            return await users_page(request, exc.status, errors={user_id: exc.message})
        return response.redirect(f"/{env}/users", status=303)

    # -- own page --------------------------------------------------------------------------------

    async def me_page(request: Request, status: int = 200, **extra: Any) -> HTTPResponse:
        viewer: Viewer = request.ctx.viewer
        got = await peers.call(
            peers.identity.ListSessions, ipb.ListSessionsRequest(session_token=viewer.session_token)
        )
        return render(
            request, "me.html", status=status, sessions=got.sessions, current=got.current_session_id, **extra
        )

    @app.get("/<env:str>/me")
    async def me(request: Request, env: str) -> HTTPResponse:
        env_of(request)
        return await me_page(request)

    @app.post("/<env:str>/me/<action:str>")
    async def me_action(request: Request, env: str, action: str) -> HTTPResponse:
        env = env_of(request)
        viewer: Viewer = request.ctx.viewer
        form = fields(request)
        try:
            if action == "password":
                got = await peers.call(
                    peers.identity.ChangePassword,
                    ipb.ChangePasswordRequest(
                        session_token=viewer.session_token,
                        current_password=form.get("current_password", ""),
                        new_password=form.get("new_password", ""),
                        source_address=request.ip or "",
                        user_agent=request.headers.get("user-agent", "")[:300],
                    ),
                )
                return signed_in(request, got.session_token, f"/{env}/me")
            if action == "totp":
                begun = await peers.call(
                    peers.identity.BeginTotpEnrollment,
                    ipb.BeginTotpEnrollmentRequest(session_token=viewer.session_token),
                )
                image = qrcode.make(begun.provisioning_uri, image_factory=qrcode.image.svg.SvgPathImage)
                qr = Markup(image.to_string(encoding="unicode"))
                totp_key = pyotp.parse_uri(begun.provisioning_uri).secret
                return await me_page(request, qr=qr, totp_key=totp_key)
            if action == "totp-confirm":
                await peers.call(
                    peers.identity.ConfirmTotpEnrollment,
                    ipb.ConfirmTotpEnrollmentRequest(
                        session_token=viewer.session_token, code=form.get("code", "")
                    ),
                )
            elif action == "totp-remove":
                try:
                    await peers.call(
                        peers.identity.DisableTotp,
                        ipb.DisableTotpRequest(
                            session_token=viewer.session_token,
                            password=form.get("totp_password", ""),
                            source_address=request.ip or "",
                        ),
                    )
                except PortalError as exc:
                    if exc.status not in (400, 401, 409) or exc.type == "session_expired":
                        raise
                    return await me_page(request, exc.status, errors={"totp_password": exc.message})
            elif action == "revoke-session":
                await peers.call(
                    peers.identity.RevokeSession,
                    ipb.RevokeSessionRequest(
                        session_token=viewer.session_token, session_id=form.get("session_id", "")
                    ),
                )
            else:
                raise PortalError(404, "not_found", "No such action.")
        except PortalError as exc:
            if exc.status not in (400, 401, 409) or exc.type == "session_expired":
                raise
            return await me_page(request, 400, errors={exc.field or action: exc.message})
        return response.redirect(f"/{env}/me", status=303)

    return app

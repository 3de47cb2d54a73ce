"""create_app(config): the portal's Sanic application. Pages live under /<env>/ (live or sandbox) so the
environment is in every URL and the switch is a link; every POST is CSRF-checked and role-checked
before any gRPC call. The routes are blueprints (portal.routes), one per resource. authsvc and webhookd
are reached through svckit.clients (``app.ctx.auth``, ``app.ctx.hooks``), whose ClientError a handler
lets through becomes the error page."""

from __future__ import annotations

import logging
import os
from typing import cast

from sanic import Request, Sanic

from portal import lifecycle
from portal.config import PortalConfig
from portal.context import PortalApp, PortalContext, PortalRequest
from portal.flash import flash_key
from portal.pages import PAGE_SIZE
from portal.routes import BLUEPRINTS
from portal.web import RouteErrorHandler
from svckit.clients import AuthClient, ClientError, HooksClient
from svckit.pacing import RefusalPacer

log = logging.getLogger("portal")

__all__ = ["PAGE_SIZE", "PortalConfig", "create_app"]


def create_app(config: PortalConfig, name: str = "portal") -> PortalApp:
    csrf_key = config.csrf_key or os.urandom(32)
    ctx = PortalContext(
        settings=config,
        # Each call's deadline: the clients' own default (svckit.clients.DEFAULT_TIMEOUT, 10 s).
        auth=AuthClient(config.authsvc, config.tls),
        hooks=HooksClient(config.webhookd, config.tls),
        csrf_key=csrf_key,
        flash_key=flash_key(csrf_key),
        secure=config.public_url.startswith("https://"),
        pacer=RefusalPacer(config.pacing),
    )
    if config.csrf_key is None:
        log.warning(
            "no --csrf-key-file / PORTAL_CSRF_KEY: CSRF tokens (and one-time flashes) use a key of this "
            "process only, so forms opened before a restart (or served by another portal process) are "
            "refused once"
        )
    # Sanic types request_class as its default Request; PortalRequest is that with typed contexts.
    app: PortalApp = Sanic(
        name,
        ctx=ctx,
        request_class=cast(type[Request], PortalRequest),
        error_handler=RouteErrorHandler(),
    )
    app.config.KEEP_ALIVE_TIMEOUT = 30
    app.on_request(lifecycle.load)
    app.middleware(lifecycle.headers, "response")
    app.exception(ClientError)(lifecycle.client_error)
    app.after_server_stop(lifecycle.close)
    for bp in BLUEPRINTS:
        app.blueprint(bp)
    return app

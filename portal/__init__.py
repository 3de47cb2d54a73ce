"""portal: the partner web portal (Sanic, server-rendered Jinja2, htmx). Talks to authsvc and webhookd
only over gRPC."""

from __future__ import annotations

from portal.app import create_app
from portal.config import PortalConfig
from portal.context import PortalApp, PortalContext, PortalRequest, Viewer

__all__ = [
    "PortalApp",
    "PortalConfig",
    "PortalContext",
    "PortalRequest",
    "Viewer",
    "create_app",
]

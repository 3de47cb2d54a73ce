"""The portal's settings (``python -m portal serve`` fills them from flags and the environment)."""

from __future__ import annotations

from dataclasses import dataclass, field

from svckit.tls import Tls


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

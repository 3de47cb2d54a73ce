"""The portal's settings (``python -m portal serve`` fills them from flags and the environment; each
flag's default is the field's here, the addresses those of svckit.addresses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from svckit import addresses
from svckit.connlimits import ConnectionLimits
from svckit.pacing import Pacing
from svckit.smtp import SmtpSettings
from svckit.tls import Tls


@dataclass
class PortalConfig:
    authsvc: str = addresses.AUTHSVC
    webhookd: str = addresses.WEBHOOKD
    public_url: str = addresses.PORTAL_URL
    smtp_host: str = ""
    smtp_port: int = 25
    mail_from: str = "portal@svc.travel"
    # The SMTP server and its settings (svckit.smtp) made from the above and the --smtp-* flags; None: no
    # mail (the invitation link is shown on the page).
    smtp: SmtpSettings | None = field(default=None, repr=False)
    # Mutual TLS to authsvc and webhookd as "portal" (svckit.tls); None is plaintext (--insecure-dev).
    tls: Tls | None = field(default=None, repr=False)
    # The key of the CSRF tokens (portal.csrf); None makes a random one for this process.
    csrf_key: bytes | None = field(default=None, repr=False)
    # Refusal pacing (svckit.pacing): past its source's allowance a 429, or a refusal with no session (a
    # sign-in refused, a forged form), is answered later (--refusal-delay, --refusal-rate, --refusal-burst,
    # --refusals-held).
    pacing: Pacing = field(default_factory=Pacing)
    # Connection limits (svckit.connlimits): open connections per client address, per /24 and in all, and
    # how long one without a session may idle (--connections, --connections-per-address, ...).
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)

"""Outbound e-mail over SMTP (aiosmtplib, on the event loop), the one sender webhookd's alerts and the
portal's invitations use, with its settings stated once (``add_smtp_flags``, ``settings_from_args``):

- ``--smtp-security``: ``starttls`` (the server must offer STARTTLS; the session is upgraded before
  anything is sent), ``tls`` (implicit TLS from the first byte, usually port 465), ``none`` (plain: a
  relay on the same host or a trusted network only) or ``auto`` (STARTTLS when the server offers it, else
  plain: the default, which works with a local relay and never sends credentials). The server's
  certificate is verified against the system's CAs or ``--smtp-ca-bundle``.
- ``--smtp-username`` and the password, from ``--smtp-password-file`` (a file holding only it) or the
  ``<SERVICE>_SMTP_PASSWORD`` environment variable; never a flag, so it is not on a command line. With a
  username the connection must be ``starttls`` or ``tls``: credentials never cross a plain connection. The
  password is not in ``repr``, a log line or an error.
- ``--smtp-timeout``: seconds for the connection and each command.

``send`` raises ``MailUnreachable`` (an ``OSError``: the server could not be reached, or the connection
broke: try later, the rest too) or ``MailRefused`` (the server answered with a refusal: this message).
"""

from __future__ import annotations

import argparse
import os
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import aiosmtplib

from svckit.fileerrors import cannot_read
from svckit.flags import add_flag, env_name

SECURITY = ("auto", "starttls", "tls", "none")
TIMEOUT = 15.0


class MailUnreachable(OSError):
    """The SMTP server could not be reached, or the connection broke (a later try may work)."""


class MailRefused(Exception):
    """The SMTP server refused this message (its recipients, its sender, the credentials...)."""


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int = 25
    sender: str = ""
    timeout: float = TIMEOUT
    security: str = "auto"
    username: str = ""
    password: str = field(default="", repr=False)
    ca_bundle: str = ""  # PEM CAs to verify the server's certificate against; "": the system's

    def __post_init__(self) -> None:
        if self.security not in SECURITY:
            raise ValueError(f"--smtp-security: {self.security!r} is not one of {', '.join(SECURITY)}")
        if self.username and self.security not in ("starttls", "tls"):
            raise ValueError(
                "--smtp-username needs --smtp-security starttls or tls: credentials never cross a plain "
                "connection"
            )
        if self.username and not self.password:
            raise ValueError("--smtp-username needs a password (--smtp-password-file or the environment)")


def tls_context(settings: SmtpSettings) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=settings.ca_bundle or None)


async def send(settings: SmtpSettings, message: EmailMessage) -> None:
    """Send ``message`` (its own From/To) through the server of ``settings``."""
    security = settings.security
    options: dict[str, Any] = {
        "hostname": settings.host,
        "port": settings.port,
        "timeout": settings.timeout,
        "use_tls": security == "tls",
        "start_tls": {"starttls": True, "auto": None}.get(security, False),
    }
    if security != "none":
        options["tls_context"] = tls_context(settings)
    if settings.username:
        options["username"], options["password"] = settings.username, settings.password
    try:
        await aiosmtplib.send(message, **options)
    except (
        aiosmtplib.SMTPConnectError,
        aiosmtplib.SMTPTimeoutError,
        aiosmtplib.SMTPServerDisconnected,
    ) as exc:
        raise MailUnreachable(f"{settings.host}:{settings.port}: {exc}") from None
    except aiosmtplib.SMTPException as exc:
        raise MailRefused(f"{settings.host}:{settings.port}: {exc}") from None
    except OSError as exc:  # a TLS handshake that failed, a refused connection
        raise MailUnreachable(f"{settings.host}:{settings.port}: {exc}") from None


def add_smtp_flags(parser: argparse.ArgumentParser | Any, service: str) -> None:
    """The SMTP settings every sender shares (the server's address is the service's own flag)."""

    def flag(name: str, **kwargs: Any) -> None:
        add_flag(parser, f"--{name}", env=env_name(service, name), **kwargs)

    flag(
        "smtp-security",
        default="auto",
        choices=SECURITY,
        help="starttls (required), tls (implicit TLS), none (plain), or auto (STARTTLS when offered)",
    )
    flag("smtp-username", default="", help="SMTP user to authenticate as (needs starttls or tls)")
    flag(
        "smtp-password-file",
        default="",
        help=f"file holding the SMTP password (else the environment's {env_name(service, 'smtp-password')})",
    )
    flag("smtp-timeout", type=float, default=TIMEOUT, help="seconds for the SMTP connection and each command")
    flag(
        "smtp-ca-bundle", default="", help="PEM CAs to verify the SMTP server against (default: the system's)"
    )


def settings_from_args(
    args: argparse.Namespace, service: str, host: str, port: int, sender: str
) -> SmtpSettings:
    """The settings of ``add_smtp_flags`` for the server ``host:port``; SystemExit with one line when they
    do not hold together or the password file cannot be read."""
    password = os.environ.get(env_name(service, "smtp-password"), "")
    if args.smtp_password_file:
        try:
            with open(args.smtp_password_file) as f:
                password = f.read().strip()
        except OSError as exc:
            why = cannot_read(exc, args.smtp_password_file)
            raise SystemExit(f"{service}: --smtp-password-file: {why}") from None
    try:
        return SmtpSettings(
            host,
            port,
            sender,
            timeout=args.smtp_timeout,
            security=args.smtp_security,
            username=args.smtp_username,
            password=password,
            ca_bundle=args.smtp_ca_bundle,
        )
    except ValueError as exc:
        raise SystemExit(f"{service}: {exc}") from None

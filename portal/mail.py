"""The portal's e-mail: one message through the configured SMTP server (svckit.smtp: STARTTLS or TLS,
authentication, a timeout; --smtp-host and the shared --smtp-* flags)."""

from __future__ import annotations

from email.message import EmailMessage

from svckit.smtp import SmtpSettings, send


async def send_mail(smtp: SmtpSettings, to: str, subject: str, body: str) -> None:
    message = EmailMessage()
    message["From"] = smtp.sender
    message["To"] = to
    message["Subject"] = subject
    message.set_content(body)
    await send(smtp, message)

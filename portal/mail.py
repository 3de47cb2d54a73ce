"""The portal's e-mail: one message through the configured SMTP server, off the event loop."""

from __future__ import annotations

import asyncio
import smtplib
from email.message import EmailMessage

from portal.config import PortalConfig


def _send(config: PortalConfig, message: EmailMessage) -> None:
    with smtplib.SMTP(config.smtp_host, config.smtp_port, timeout=15) as smtp:
        smtp.send_message(message)


async def send_mail(config: PortalConfig, to: str, subject: str, body: str) -> None:
    message = EmailMessage()
    message["From"] = config.mail_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(body)
    await asyncio.to_thread(_send, config, message)

"""E-mails to an account's people when one of its endpoints is failing (50 %, 90 %) or disabled.

Alerts are rows written in the same transaction that disables the endpoint, or that publishes the
``endpoint.failing`` notice (``webhookd._notices``; which ones: ``webhookd._alert_policy``), so a crash
never loses one;
this loop sends the pending ones over SMTP and marks them sent once they were: an alert that cannot be
sent yet (no SMTP server, no recipient, SMTP down) stays pending. Recipients: as authsvc answers them
(``--authsvc``, GetAlertRecipients: the account's portal owners and admins and the extra addresses it
sets on the portal's Notifications page; ``webhookd._accounts``), looked up when the alert is sent; when
authsvc knows nobody or cannot be reached, the configured ``--alert-email`` addresses. Each e-mail links
the endpoint's portal page (``--portal-url``) and names the partner API calls that mend it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from email.message import EmailMessage

from svckit import addresses
from svckit.clock import Clock
from svckit.outage import OutageLog
from svckit.smtp import MailRefused, MailUnreachable, SmtpSettings, send
from webhookd import _metrics as metrics
from webhookd._alert_policy import fix_for, level_of
from webhookd._health import DISABLED_LEVEL
from webhookd._leak_alerts import compose_leak, is_leak_alert
from webhookd._repository import Alert, Repository
from webhookd._traffic_mail import compose_traffic, is_traffic_alert

log = logging.getLogger("webhookd.mailer")
OUTAGES = OutageLog(log)

AdminLookup = Callable[[str], Awaitable[list[str]]]
PAGE = 100  # pending alerts read per query
PORTAL_URL = addresses.PORTAL_URL


# The alerts' From address (--smtp-from).
SENDER = "webhooks@svc.travel"


def compose(
    alert: Alert, sender: str, recipients: Sequence[str], portal_url: str = PORTAL_URL
) -> EmailMessage:
    """The e-mail of a disable or failing alert (``webhookd._alert_policy``): what happened, the endpoint's
    portal page and the partner API calls that mend it. A leaked key's alert: ``webhookd._leak_alerts``."""
    if is_leak_alert(alert.id):
        return compose_leak(alert, sender, recipients, portal_url)
    if is_traffic_alert(alert.id):
        return compose_traffic(alert, sender, recipients, portal_url)
    level = level_of(alert.id)
    fix = fix_for(
        level,
        alert.endpoint_id,
        environment=alert.environment,
        portal_url=portal_url,
        since=alert.created_at,
        reason=alert.reason,
    )
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg["Subject"] = fix.subject
    where = f"{alert.endpoint_id} ({alert.url}, {alert.environment} environment, account {alert.account_id})"
    calls = "".join(f"  {c}\n" for c in fix.calls)
    if level >= DISABLED_LEVEL:
        body = (
            f"Your webhook endpoint {where} was disabled at {alert.created_at.isoformat()} because "
            f"{fix.what}.\n\nLast error: {alert.reason}\n\n"
            "Events for this endpoint are kept, not sent. Fix the endpoint, then re-enable it and recover "
            f"the missed events on its portal page:\n\n  {fix.portal}\n\n"
            "or with the API (a key with webhooks:write; recover from the time it was disabled):\n\n"
            f"{calls}"
        )
    else:
        body = (
            f"Your webhook endpoint {where} is failing: {fix.what}.\n\nLast error: {alert.reason}\n\n"
            "Nothing is lost yet: failed deliveries are retried on schedule. See its delivery attempts and "
            f"send a test event on its portal page:\n\n  {fix.portal}\n\n"
            f"or with the API (webhooks:read to list, webhooks:write to test):\n\n{calls}\n"
            "This e-mail comes at most once per level (50 %, 90 %) until the endpoint answers a delivery "
            "with 2xx again, and at most once an hour per level.\n"
        )
    msg.set_content(body)
    return msg


class Mailer:
    def __init__(
        self,
        repo: Repository,
        clock: Clock,
        smtp: SmtpSettings | None,
        *,
        lookup: AdminLookup | None = None,
        fallback: Sequence[str] = (),
        retry_seconds: float = 30.0,
        portal_url: str = PORTAL_URL,
    ) -> None:
        self.repo = repo
        self.clock = clock
        self.smtp = smtp
        self.lookup = lookup
        self.fallback = list(fallback)
        self.retry_seconds = retry_seconds
        self.portal_url = portal_url
        self._wake = asyncio.Event()
        self._stopping = False
        # Say once (per process) why an alert is waiting, not at every pass.
        self._told_no_smtp = False
        self._told_no_recipient: set[str] = set()

    def wake(self, _alerts: object = None) -> None:
        self._wake.set()

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def recipients(self, account_id: str) -> list[str]:
        if self.lookup is not None:
            try:
                found = await self.lookup(account_id)
                if found:
                    return found
            except Exception as exc:  # authsvc down: fall back rather than lose the alert
                log.warning(
                    "alert recipient lookup failed", extra={"account_id": account_id, "error": str(exc)}
                )
        return list(self.fallback)

    async def send_pending(self) -> int:
        """Send every pending alert once; returns how many were sent.

        An alert is marked sent only once an SMTP server took it. Without an SMTP server, without a
        recipient, or on an SMTP error it stays pending and goes out on a later pass (after ``--smtp`` or
        ``--alert-email`` is set and webhookd restarted, or the server is back).
        """
        if self.smtp is None:
            pending = await self.repo.pending_alerts(1)
            if pending and not self._told_no_smtp:
                self._told_no_smtp = True
                log.error("alerts are waiting: no SMTP server configured (--smtp); they stay pending")
                metrics.ALERTS_SENT.labels("skipped").inc()
            return 0
        sent = 0
        after: tuple[dt.datetime, str] | None = None
        try:
            while batch := await self.repo.pending_alerts(PAGE, after):
                after = (batch[-1].created_at, batch[-1].id)
                for alert in batch:
                    sent += await self._send(self.smtp, alert)
        except OSError:
            pass  # the SMTP server is unreachable: the rest waits for the next pass
        return sent

    async def _send(self, smtp: SmtpSettings, alert: Alert) -> int:
        to = await self.recipients(alert.account_id)
        fields = {"endpoint_id": alert.endpoint_id, "account_id": alert.account_id, "alert_id": alert.id}
        if not to:
            if alert.id not in self._told_no_recipient:
                self._told_no_recipient.add(alert.id)
                log.error(
                    "alert waiting: no recipient known (the account has no portal owner or admin "
                    "and no extra address, and no --alert-email is set)",
                    extra=fields,
                )
                metrics.ALERTS_SENT.labels("skipped").inc()
            return 0
        try:
            await send(smtp, compose(alert, smtp.sender or SENDER, to, self.portal_url))
        except (MailUnreachable, MailRefused) as exc:
            log.warning("alert e-mail failed; will retry", extra={**fields, "error": str(exc)})
            metrics.ALERTS_SENT.labels("error").inc()
            if isinstance(exc, MailUnreachable):  # an OSError: the rest of the pass waits too
                raise
            return 0
        await self.repo.finish_alert(alert.id, self.clock.now())
        self._told_no_recipient.discard(alert.id)
        metrics.ALERTS_SENT.labels("sent").inc()
        log.info("alert e-mailed", extra={**fields, "recipients": len(to)})
        return 1

    async def run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self.send_pending()
            except Exception as exc:
                if OUTAGES.count(exc) is None:  # an outage: one summary line per 10 s (svckit.outage)
                    log.exception("sending alerts failed")
            try:
                async with asyncio.timeout(self.retry_seconds):
                    await self._wake.wait()
            except TimeoutError:
                pass

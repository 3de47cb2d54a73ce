"""The e-mail to an account's people when one of its API keys was found in public (apikey.leaked).

authsvc revokes the key and queues apikey.leaked in the same transaction (its outbox); when the event
reaches webhookd's PublishEvent, the account's subscribed endpoints get it like any event, and an alert
row is stored here for the mailer (``webhookd._mailer``), which sends it to the same people as the
endpoint alerts (the account's portal owners and admins, and its extra addresses). One place for both
the event and the e-mail: webhookd already keeps pending alerts across crashes and retries SMTP. The alert's
id is the key's (``alleak_<key id>``), so the outbox relay publishing again after a lost answer stores no
second alert and sends no second e-mail. The e-mail names the key by its hint, never its secret.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from typing import Any

from webhookd._repository import Alert

LEAKED_KIND = "apikey.leaked"
LEAK_PREFIX = "alleak_"


def is_leak_alert(alert_id: str) -> bool:
    return alert_id.startswith(LEAK_PREFIX)


def leak_alert(account_id: str, environment: str, data: Mapping[str, Any], now: dt.datetime) -> Alert:
    """The alert of an apikey.leaked event's ``data`` (its schema: svckit.eventkinds)."""
    detail = {k: str(data.get(k, "")) for k in ("hint", "name", "source", "reporter", "revokedAt")}
    return Alert(
        id=f"{LEAK_PREFIX}{data['keyId']}",
        account_id=account_id,
        environment=environment,
        endpoint_id=str(data["keyId"]),  # the column names what the alert is about: here a key
        url=str(data.get("url", "")),
        reason=json.dumps(detail, sort_keys=True),
        created_at=now,
    )


def compose_leak(alert: Alert, sender: str, recipients: Sequence[str], portal_url: str) -> EmailMessage:
    detail = json.loads(alert.reason)
    key_id, env = alert.endpoint_id, alert.environment
    where = alert.url or "a public place"
    page = f"{portal_url.rstrip('/')}/{env}/keys/{key_id}"
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg["Subject"] = f"API key {detail['hint']} was found in public and has been revoked"
    named = f" ({detail['name']})" if detail.get("name") else ""
    reporter = detail.get("reporter") or "a secret scanner"
    source = f" (in {detail['source']})" if detail.get("source") else ""
    msg.set_content(
        f"Your {env} API key {detail['hint']}{named}, id {key_id}, account {alert.account_id}, was found in "
        f"public at:\n\n  {where}{source}\n\nreported by {reporter}. We revoked it at {detail['revokedAt']}: "
        "every request made with it is now refused.\n\n"
        "What to do:\n"
        f"  1. Create a new key on the portal ({portal_url.rstrip('/')}/{env}/keys) and deploy it where the "
        "old one was used.\n"
        "  2. Remove the secret from where it was published (and from the history of a repository): "
        "anyone may have copied it.\n"
        "  3. Check what the key did before it was revoked: its requests are on the portal's request log, "
        f"and the key's page shows the revocation:\n\n  {page}\n"
    )
    return msg

"""The e-mails to an account's people about its traffic: look-to-book past its target
(``account.look_to_book_exceeded``) and an anomaly of the last hour (``account.anomaly``).

authsvc decides and queues the event (authsvc._traffic_alerts, at most once a week and once an hour per
kind of anomaly); when it reaches PublishEvent in the live environment, an alert row is stored here for the
mailer (``webhookd._mailer``), which sends it to the account's portal owners and admins and its extra
addresses, like the endpoint and leaked-key alerts: pending alerts survive a crash and wait out an SMTP
outage. The alert's id comes from the event's data (the account, the kind and its window), so the relay
publishing again after a lost answer stores no second alert. The sandbox's samples of these kinds e-mail
nobody.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from typing import Any

from svckit.accountkinds import ANOMALY, LOOK_TO_BOOK
from webhookd._leak_alerts import LEAKED_KIND, leak_alert
from webhookd._repository import Alert

TRAFFIC_KINDS = (LOOK_TO_BOOK, ANOMALY)
PREFIX = "altraffic_"


def is_traffic_alert(alert_id: str) -> bool:
    return alert_id.startswith(PREFIX)


def traffic_alert(
    account_id: str, environment: str, kind: str, data: Mapping[str, Any], now: dt.datetime
) -> Alert | None:
    """The alert of a live traffic event (None for a sandbox one: nobody is e-mailed a sample)."""
    if environment != "live" or kind not in TRAFFIC_KINDS:
        return None
    if kind == LOOK_TO_BOOK:
        what, window = "look_to_book", str(data["to"])
    else:
        what, window = f"anomaly_{data['anomaly']}", str(data["since"])
    return Alert(
        id=f"{PREFIX}{account_id}_{what}_{window}"[:64],
        account_id=account_id,
        environment=environment,
        endpoint_id=kind,  # the column names what the alert is about: here the event kind
        url="",
        reason=json.dumps(dict(data), sort_keys=True),
        created_at=now,
    )


def event_alert(
    account_id: str, environment: str, kind: str, data: Mapping[str, Any], now: dt.datetime
) -> Alert | None:
    """The alert e-mail a published event asks for, if any: a leaked key's (webhookd._leak_alerts) or a
    live traffic event's."""
    if kind == LEAKED_KIND:
        return leak_alert(account_id, environment, data, now)
    return traffic_alert(account_id, environment, kind, data, now)


def compose_traffic(alert: Alert, sender: str, recipients: Sequence[str], portal_url: str) -> EmailMessage:
    data = json.loads(alert.reason)
    base = f"{portal_url.rstrip('/')}/{alert.environment}/insights"
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    if alert.endpoint_id == LOOK_TO_BOOK:
        msg["Subject"] = (
            f"Look-to-book {data['searchesPerBooking']:,.0f}:1 is past your target of {data['target']:,}:1"
        )
        body = (
            f"Account {alert.account_id} made {data['searches']:,} live searches and {data['bookings']:,} "
            f"confirmed bookings from {data['from']} to {data['to']} (UTC): "
            f"{data['searchesPerBooking']:,.0f} searches per booking, past the contractual target of "
            f"{data['target']:,}.\n\n"
            "Searches are what the supplier pays for; bookings pay for them. Cache search results, search "
            "only what travellers ask for, and check the searches per key on the portal:\n\n"
            f"  {base}/searches\n  {base}/keys\n\n"
            "This e-mail comes at most once a week while the ratio stays past the target.\n"
        )
    else:
        since = data["since"]
        if data["anomaly"] == "error_rate":
            msg["Subject"] = f"Errors jumped to {data['errorRate']:.0%} of your API requests"
            what = (
                f"{data['errors']:,} of {data['requests']:,} requests ({data['errorRate']:.1%}) were "
                f"answered with an error, against {data['baselineErrorRate']:.1%} over the 7 days before"
            )
            page = f"{base}/errors"
        else:
            msg["Subject"] = f"API latency jumped: p95 {data['p95Ms']:,.0f} ms"
            what = (
                f"the 95th percentile latency was {data['p95Ms']:,.0f} ms over {data['requests']:,} "
                f"requests, against {data['baselineP95Ms']:,.0f} ms over the 7 days before"
            )
            page = base
        body = (
            f"In the hour from {since} to {data['until']}, for account {alert.account_id}'s "
            f"{data['environment']} keys, {what}.\n\nSee which routes, keys and error types on the portal:"
            f"\n\n  {page}\n\nThis e-mail comes at most once an hour per kind of anomaly.\n"
        )
    msg.set_content(body)
    return msg

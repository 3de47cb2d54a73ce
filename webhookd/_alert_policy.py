"""Which alert e-mails an endpoint's trouble sends, and what each says to do; pure.

Why: the disable e-mail comes 32 hours into an endpoint's trouble. The catalog's ``endpoint.failing``
events warn a partner's systems at 50 % and 90 % of the road to disabling (``webhookd._health``); people
get the same warnings by e-mail, to the same recipients as the disable e-mail. Rules:

  1. the disable e-mail is always sent (once per disabling; re-enabling takes a person);
  2. each failing level is e-mailed at most once per endpoint until it recovers (``failing_level`` only
     rises until a 2xx clears it, so a level is raised once: ``webhookd._health``);
  3. a flapping endpoint (failing, recovering, failing again) sends at most one failing e-mail of a level
     per hour: a failing e-mail is held back when one of the same or a higher level went out for the endpoint
     in the hour before (``FLOOR``). A 90 % e-mail after a 50 % one is never held back: it is the last
     warning before disabling.

A failing alert is a row of ``wh_alerts`` like a disable alert; its id says its level and the notice it
came from (``failing_alert_id``), so two relays making it from the same notice make one row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from webhookd._health import DISABLED_LEVEL, attempts_for
from webhookd._steering import GONE_REASON

FLOOR = dt.timedelta(hours=1)
FAILING_PREFIX = "alfl"


def failing_alert_id(notice_id: str, level: int) -> str:
    """The id of the failing alert made from notice ``notice_id`` (``alfl50_ntc_...``)."""
    return f"{FAILING_PREFIX}{level}_{notice_id}"


def level_of(alert_id: str) -> int:
    """The level an alert announces: 50 or 90 for a failing alert, 100 for a disable alert."""
    head = alert_id.split("_", 1)[0]
    if head.startswith(FAILING_PREFIX) and head[len(FAILING_PREFIX) :].isdigit():
        return int(head[len(FAILING_PREFIX) :])
    return DISABLED_LEVEL


def failing_email_due(level: int, at: dt.datetime, earlier: Iterable[tuple[int, dt.datetime]]) -> bool:
    """Is a failing e-mail of ``level`` raised at ``at`` sent, given the endpoint's earlier failing alerts
    (level, created)? Held back when one of the same or a higher level is less than ``FLOOR`` older."""
    return not any(lvl >= level and at - FLOOR < t <= at for lvl, t in earlier)


@dataclass(frozen=True, slots=True)
class Fix:
    """What an alert e-mail says: where to look and which calls mend it."""

    subject: str
    what: str
    portal: str
    calls: tuple[str, ...]


def endpoint_page(portal_url: str, environment: str, endpoint_id: str) -> str:
    """The portal page of an endpoint (the portal's route ``/<env>/webhooks/<id>``)."""
    return f"{portal_url.rstrip('/')}/{environment}/webhooks/{endpoint_id}"


def fix_for(
    level: int, endpoint_id: str, *, environment: str, portal_url: str, since: dt.datetime, reason: str
) -> Fix:
    """The e-mail's subject, what happened, the portal link and the partner HTTP calls that mend it."""
    page = endpoint_page(portal_url, environment, endpoint_id)
    path = f"/v1/webhooks/endpoints/{endpoint_id}"
    if level >= DISABLED_LEVEL:
        gone = reason.startswith(GONE_REASON)
        return Fix(
            subject=(
                f"Webhook endpoint {endpoint_id} disabled: it answered 410 Gone"
                if gone
                else f"Webhook endpoint {endpoint_id} disabled after repeated delivery failures"
            ),
            what="it answered 410 Gone" if gone else "every delivery attempt of the retry schedule failed",
            portal=page,
            calls=(
                f"POST {path}/enable",
                f'POST {path}/recover with {{"since": "{since.isoformat().replace("+00:00", "Z")}"}}',
            ),
        )
    attempts = attempts_for(level)
    return Fix(
        subject=f"Webhook endpoint {endpoint_id} failing: {level} % of the way to being disabled",
        what=(
            f"a delivery to it has failed {attempts} attempts in a row; after the 7th fails the endpoint is "
            "disabled"
        ),
        portal=page,
        calls=(f"GET /v1/webhooks/attempts?endpoint={endpoint_id}", f"POST {path}/test"),
    )

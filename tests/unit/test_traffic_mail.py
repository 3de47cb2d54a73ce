"""The traffic alerts' e-mails (webhookd._traffic_mail), by table: which published events store an alert
(live traffic kinds and leaked keys; never a sandbox sample), one id per account, kind and window (a
relay's retry stores no second), and what each e-mail says."""

from __future__ import annotations

import datetime as dt

import pytest

from svckit import accountkinds, catalog
from webhookd._leak_alerts import is_leak_alert
from webhookd._traffic_mail import compose_traffic, event_alert, is_traffic_alert

NOW = dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)
HOUR = dt.datetime(2026, 6, 1, 10, tzinfo=dt.UTC)
LTB = accountkinds.look_to_book_exceeded(dt.date(2026, 5, 26), dt.date(2026, 6, 1), 30_000, 10, 1500)
ERR = accountkinds.anomaly("error_rate", HOUR, "live", 200, 60, 240.0, 0.01, 210.0)
LAT = accountkinds.anomaly("latency", HOUR, "live", 200, 0, 2500.0, 0.0, 100.0)

ALERTS = [
    ("look-to-book live", "live", accountkinds.LOOK_TO_BOOK, LTB, "altraffic_acct_1_look_to_book_2026-06-01"),
    ("look-to-book sandbox sample", "sandbox", accountkinds.LOOK_TO_BOOK, LTB, None),
    ("error rate", "live", accountkinds.ANOMALY, ERR, "altraffic_acct_1_anomaly_error_rate_2026-06-01T10:00"),
    ("latency", "live", accountkinds.ANOMALY, LAT, "altraffic_acct_1_anomaly_latency_2026-06-01T10:00:0"),
    ("a booking", "live", "booking.confirmed", catalog.example("booking.confirmed"), None),
]


@pytest.mark.parametrize(("name", "env", "kind", "data", "alert_id"), ALERTS, ids=[a[0] for a in ALERTS])
def test_which_events_store_an_alert(
    name: str, env: str, kind: str, data: dict[str, object], alert_id: str | None
) -> None:
    alert = event_alert("acct_1", env, kind, data, NOW)
    if alert_id is None:
        assert alert is None
        return
    assert alert is not None and alert.id.startswith(alert_id) and len(alert.id) <= 64
    assert is_traffic_alert(alert.id) and not is_leak_alert(alert.id)
    # The same event again (the relay's retry) is the same alert.
    again = event_alert("acct_1", env, kind, data, NOW + dt.timedelta(seconds=5))
    assert again is not None and again.id == alert.id


def test_a_leaked_key_still_stores_its_alert() -> None:
    alert = event_alert("acct_1", "live", "apikey.leaked", catalog.example("apikey.leaked"), NOW)
    assert alert is not None and is_leak_alert(alert.id)


MAILS = [
    # (data, kind, subject, what the body says, the page it links)
    (LTB, accountkinds.LOOK_TO_BOOK, "Look-to-book 3,000:1 is past your target of 1,500:1",
     "30,000 live searches", "/live/insights/searches"),
    (ERR, accountkinds.ANOMALY, "Errors jumped to 30% of your API requests", "60 of 200 requests (30.0%)",
     "/live/insights/errors"),
    (LAT, accountkinds.ANOMALY, "API latency jumped: p95 2,500 ms", "against 100 ms", "/live/insights"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "kind", "subject", "says", "link"), MAILS)
def test_the_e_mails(data: dict[str, object], kind: str, subject: str, says: str, link: str) -> None:
    alert = event_alert("acct_1", "live", kind, data, NOW)
    assert alert is not None
    msg = compose_traffic(
        alert, "alerts@svc.travel", ["a@p.example", "b@p.example"], "https://portal.example/"
    )
    assert msg["Subject"] == subject and msg["To"] == "a@p.example, b@p.example"
    body = msg.get_content()
    assert says in body and f"https://portal.example{link}" in body

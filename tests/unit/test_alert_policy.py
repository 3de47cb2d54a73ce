"""Which failing alerts are e-mailed and what each alert e-mail says to do (webhookd._alert_policy), by
table."""

from __future__ import annotations

import datetime as dt

import pytest

from webhookd._alert_policy import (
    endpoint_page,
    failing_alert_id,
    failing_email_due,
    fix_for,
    level_of,
)
from webhookd._steering import GONE_REASON

T = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


@pytest.mark.parametrize(
    ("level", "earlier", "due"),
    [
        (50, [], True),  # the first warning
        (90, [], True),
        (50, [(50, T - 59 * MIN)], False),  # the same level within the hour: held back
        (50, [(50, T - 60 * MIN)], True),  # an hour later: sent
        (50, [(90, T - 10 * MIN)], False),  # a higher level within the hour covers it
        (90, [(50, T - 10 * MIN)], True),  # the last warning before disabling is never held back by 50
        (90, [(90, T - 30 * MIN)], False),
        (50, [(50, T + MIN)], True),  # a later one does not count
    ],
)
def test_failing_email_due(level: int, earlier: list[tuple[int, dt.datetime]], due: bool) -> None:
    assert failing_email_due(level, T, earlier) is due


@pytest.mark.parametrize(
    ("alert_id", "level"),
    [
        (failing_alert_id("ntc_abc", 50), 50),
        (failing_alert_id("ntc_abc", 90), 90),
        ("alrt_0123456789", 100),  # a disable alert
        ("alflx_ntc_abc", 100),
    ],
)
def test_level_of(alert_id: str, level: int) -> None:
    assert level_of(alert_id) == level


def test_every_fix_links_the_portal_page_and_names_http_calls() -> None:
    page = endpoint_page("https://portal.example/", "sandbox", "we_1")
    assert page == "https://portal.example/sandbox/webhooks/we_1"
    for level, reason in ((50, "HTTP 503"), (90, "HTTP 503"), (100, "7 attempts"), (100, GONE_REASON)):
        fix = fix_for(level, "we_1", environment="sandbox", portal_url="https://portal.example/",
                      since=T, reason=reason)  # fmt: skip
        assert fix.portal == page
        assert fix.calls and all(c.split()[0] in {"GET", "POST"} for c in fix.calls)
        assert all(" /v1/webhooks/" in c for c in fix.calls)
    disabled = fix_for(100, "we_1", environment="live", portal_url="https://p", since=T, reason=GONE_REASON)
    assert "410 Gone" in disabled.subject
    assert disabled.calls == (
        "POST /v1/webhooks/endpoints/we_1/enable",
        'POST /v1/webhooks/endpoints/we_1/recover with {"since": "2026-05-01T12:00:00Z"}',
    )

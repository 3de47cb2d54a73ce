"""The portal's Events and delivery pages over real HTTP against a real webhookd: the delivery
log's filters, the events list and an event's page, a delivery's page, and the sandbox clock."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import html
import json
import re

from portal.app import PAGE_SIZE
from tests.integration.portal_stack import Stack, _next_page, receiver, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of, event_data
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from webhookd.testing import Receiver


async def test_delivery_log_filters_by_event_kind_in_webhookd(stack: Stack) -> None:
    await stack.hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=stack.account_id,
            environment=wpb.ENVIRONMENT_SANDBOX,
            url="http://127.0.0.1:9/hooks",
            events=["booking.confirmed", "booking.cancelled"],
        )
    )
    # A page and two more of each kind, interleaved (nothing listens there: they stay undelivered).
    for i in range(2 * PAGE_SIZE + 4):
        kind = "booking.cancelled" if i % 2 else "booking.confirmed"
        await stack.hooks.PublishEvent(
            wpb.PublishEventRequest(
                account_id=stack.account_id,
                environment=wpb.ENVIRONMENT_SANDBOX,
                type=kind,
                data=event_data(kind),
            )
        )
    dora = await stack.join("dora@acme.example", ipb.USER_ROLE_VIEWER)
    first = await dora.get("/sandbox/deliveries", params={"event_kind": "booking.cancelled"})
    assert first.status_code == 200
    assert _rows(first.text) == ["booking.cancelled"] * PAGE_SIZE  # a whole page of matches
    second = await dora.get("/sandbox/deliveries" + _next_page(first.text))
    assert _rows(second.text) == ["booking.cancelled"] * 2  # the rest, none twice
    assert _next_page(second.text) == ""
    unfiltered = await dora.get("/sandbox/deliveries")
    assert sorted(set(_rows(unfiltered.text))) == ["booking.cancelled", "booking.confirmed"]
    refused = await dora.get("/sandbox/deliveries", params={"event_kind": "booking.nope"})
    assert refused.status_code == 400 and "unknown event kind" in refused.text

    await dora.aclose()


def _rows(page: str) -> list[str]:
    """The event kinds of the delivery log's rows, in order."""
    return re.findall(r"<td>([a-z_.]+) <code>evt_", page)


# -- Events, a delivery's page, the sandbox clock --------------------------------------------------------


async def _publish(stack: Stack, kind: str, **data: str) -> wpb.Event:
    request = wpb.PublishEventRequest(
        account_id=stack.account_id,
        environment=wpb.ENVIRONMENT_SANDBOX,
        type=kind,
        data=event_data(kind, **data),
    )
    published: wpb.PublishEventResponse = await stack.hooks.PublishEvent(request)
    return published.event


async def _register(stack: Stack, url: str, *kinds: str) -> str:
    made: wpb.RegisterEndpointResponse = await stack.hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, url=url, events=kinds
        )
    )
    return made.endpoint.id


def _event_rows(page: str) -> list[tuple[str, str]]:
    """The events page's rows, in order: (event id, kind)."""
    return re.findall(
        r'data-event-id="(evt_[A-Za-z0-9]+)">.*?data-testid="event-kind">([a-z_.]+)<', page, re.S
    )


async def test_events_page_lists_filters_and_pages_newest_first(stack: Stack) -> None:
    # Nothing subscribed: events without deliveries.
    kinds = ["booking.confirmed" if i % 6 else "booking.cancelled" for i in range(34)]
    published = [await _publish(stack, kind) for kind in kinds]
    dora = await stack.join("events-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    first = await dora.get("/sandbox/events")
    assert first.status_code == 200
    assert 'href="/sandbox/events"' in first.text  # in the navigation
    newest = [(e.id, e.type) for e in reversed(published)]
    assert _event_rows(first.text) == newest[:PAGE_SIZE]
    second = await dora.get("/sandbox/events" + _next_page(first.text))
    assert _event_rows(second.text) == newest[PAGE_SIZE:]
    assert _next_page(second.text) == ""
    assert all(f'href="/sandbox/events/{e.id}"' in first.text + second.text for e in published)

    # The kind filter: a select of every kind, only that kind listed, and it carries to the next page.
    cancelled = await dora.get("/sandbox/events", params={"kind": "booking.cancelled"})
    assert _event_rows(cancelled.text) == [(i, k) for i, k in newest if k == "booking.cancelled"]
    assert "<option selected>booking.cancelled</option>" in cancelled.text
    assert "<option>apikey.revoked</option>" in cancelled.text
    confirmed = await dora.get("/sandbox/events", params={"kind": "booking.confirmed"})
    assert [k for _, k in _event_rows(confirmed.text)] == ["booking.confirmed"] * PAGE_SIZE
    assert "kind=booking.confirmed" in _next_page(confirmed.text)
    rest = await dora.get("/sandbox/events" + _next_page(confirmed.text))
    assert [k for _, k in _event_rows(rest.text)] == ["booking.confirmed"] * (28 - PAGE_SIZE)

    # A time range: none of these events is from before an hour ago.
    old = await dora.get("/sandbox/events", params={"until": "2020-01-01T00:00"})
    assert old.status_code == 200 and _event_rows(old.text) == []
    # Refusals beside their fields, over an empty list.
    refused = await dora.get("/sandbox/events", params={"kind": "booking.nope"})
    assert refused.status_code == 400 and 'data-field="types"' in refused.text
    assert "unknown event kind" in refused.text and _event_rows(refused.text) == []
    bad_time = await dora.get("/sandbox/events", params={"since": "yesterday"})
    assert bad_time.status_code == 400 and 'data-field="since"' in bad_time.text
    # Sandbox events are not live ones.
    assert _event_rows((await dora.get("/live/events")).text) == []
    await dora.aclose()


async def test_an_events_page_shows_its_payload_and_its_deliveries(stack: Stack, receiver: Receiver) -> None:
    endpoint = await _register(stack, receiver.url("/events"), "booking.confirmed")
    await _register(stack, "http://127.0.0.1:9/unused", "booking.cancelled")
    event = await _publish(
        stack, "booking.confirmed", booking="bk_1", customerRef="<script>alert(1)</script>"
    )
    await receiver.wait_for(1)
    dora = await stack.join("event-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    listed = await dora.get("/sandbox/events")
    assert f'href="/sandbox/events/{event.id}"' in listed.text

    page = await dora.get(f"/sandbox/events/{event.id}")
    assert page.status_code == 200
    assert 'data-testid="event-kind">booking.confirmed<' in page.text
    assert 'data-testid="event-state">confirmed<' in page.text
    assert 'data-testid="livemode">false<' in page.text
    payload = html.unescape(re.search(r'data-testid="payload">(.*?)</pre>', page.text, re.S)[1])  # type: ignore[index]
    assert payload == json.dumps(json.loads(event.envelope_json), indent=2, ensure_ascii=False)
    assert f'\n  "id": "{event.id}",\n' in payload
    # Autoescaped: the payload's markup is text.
    assert (
        "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    )
    # Its one delivery (the booking.cancelled endpoint got none), linked to its page.
    deliveries = re.findall(r'href="/sandbox/deliveries/(msg_[A-Za-z0-9]+)"', page.text)
    assert len(deliveries) == 1
    assert f'href="/sandbox/webhooks/{endpoint}"' in page.text

    # Unknown, another environment's, or not an event id: the portal's 404.
    for path in ("/sandbox/events/evt_nosuchevent", f"/live/events/{event.id}"):
        missing = await dora.get(path)
        assert missing.status_code == 404, path
    await dora.aclose()


async def test_a_deliverys_page_shows_its_event_endpoint_status_payload_and_attempts_newest_first(
    stack: Stack, receiver: Receiver
) -> None:
    url = receiver.url("/delivery")
    endpoint = await _register(stack, url, "booking.confirmed")
    event = await _publish(stack, "booking.confirmed", booking="bk_2")
    await receiver.wait_for(1)
    dev = await stack.join("delivery-dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    listed = await dev.get(f"/sandbox/events/{event.id}")
    delivery = re.search(r'href="/sandbox/deliveries/(msg_[A-Za-z0-9]+)"', listed.text)[1]  # type: ignore[index]
    path = f"/sandbox/deliveries/{delivery}"
    page = ""
    for _ in range(200):
        page = (await dev.get(path)).text
        if 'data-testid="delivery-status">succeeded<' in page:
            break
        await asyncio.sleep(0.05)
    facts = re.search(r'data-testid="delivery-facts">(.*?)</dl>', page, re.S)
    assert facts, page
    assert f'<a href="/sandbox/events/{event.id}">booking.confirmed</a>' in facts[1]
    assert f'<a href="/sandbox/webhooks/{endpoint}">{url}</a>' in facts[1]
    assert 'data-testid="delivery-status">succeeded<' in facts[1]
    payload = html.unescape(re.search(r'data-testid="payload">(.*?)</pre>', page, re.S)[1])  # type: ignore[index]
    assert json.loads(payload) == json.loads(event.envelope_json) and "\n  " in payload
    # Response bodies are collapsed.
    collapsed = r'<details data-testid="response-body-details"><summary>[^<]*</summary><pre data-testid='
    assert re.search(collapsed + '"response-body">', page)

    # Two resends: three attempts, the newest first (the page and its htmx refresh alike).
    seen = re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', page)
    assert len(seen) == 1
    token = csrf_of(page)
    for n in (2, 3):
        resent = await dev.post(
            f"/sandbox/attempts/{seen[-1]}/resend", headers={"X-CSRF-Token": token, "HX-Request": "true"}
        )
        assert resent.status_code == 202
        made = seen
        for _ in range(200):
            made = re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', (await dev.get(path)).text)
            if len(made) == n:
                break
            await asyncio.sleep(0.05)
        # The new one on top, the others below as they were.
        assert len(made) == n and made[1:] == seen and made[0] not in seen
        seen = made
    page = (await dev.get(path)).text
    ordered = re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', page)
    fragment = (await dev.get(path, headers={"HX-Request": "true"})).text
    assert re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', fragment) == ordered
    stamps = re.findall(r"<dt>When</dt><dd>([^<]+)</dd>", page)
    assert stamps == sorted(stamps, reverse=True) and len(stamps) == 3

    # A test event's delivery: no event page (test events are not in the event log), said so.
    token = csrf_of((await dev.get(f"/sandbox/webhooks/{endpoint}")).text)
    sent = await dev.post(f"/sandbox/webhooks/{endpoint}/test", data={"csrf": token})
    test_page = (await dev.get(sent.headers["location"])).text
    for _ in range(200):
        if 'data-testid="delivery-facts"' in test_page:
            break
        await asyncio.sleep(0.05)
        test_page = (await dev.get(sent.headers["location"])).text
    assert "webhook.test" in test_page and 'data-testid="payload-missing"' in test_page
    assert 'href="/sandbox/events/' not in test_page
    await dev.aclose()


async def test_sandbox_clock_button_advances_the_schedule_and_says_what_is_due(stack: Stack) -> None:
    dev = await stack.join("clock-dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    webhooks = await dev.get("/sandbox/webhooks")
    assert 'data-testid="sandbox-clock"' in webhooks.text and 'action="/sandbox/clock"' in webhooks.text
    for choice in ("1m", "5m", "30m", "2h", "6h", "24h"):
        assert f">{choice}</option>" in webhooks.text
    assert 'data-testid="sandbox-clock"' in (await dev.get("/sandbox/deliveries")).text
    # Never on live.
    for path in ("/live/webhooks", "/live/deliveries"):
        assert 'data-testid="sandbox-clock"' not in (await dev.get(path)).text
    token = csrf_of(webhooks.text)

    nothing = await dev.post("/sandbox/clock", data={"csrf": token, "by": "5m", "back": "webhooks"})
    assert nothing.status_code == 303 and nothing.headers["location"] == "/sandbox/webhooks"
    shown = await dev.get("/sandbox/webhooks")
    assert 'data-testid="notice">Sandbox clock advanced by 5m: 0 deliveries due now<' in shown.text
    assert "Sandbox clock advanced" not in (await dev.get("/sandbox/webhooks")).text  # once

    # A delivery whose first attempt failed waits a minute for its second: 2h brings it due now.
    await _register(stack, "http://127.0.0.1:9/down", "booking.confirmed")
    event = await _publish(stack, "booking.confirmed")
    for _ in range(200):
        got = await stack.hooks.ListDeliveries(
            wpb.ListDeliveriesRequest(
                account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, event_id=event.id
            )
        )
        if got.deliveries and got.deliveries[0].attempt_count == 1:
            break
        await asyncio.sleep(0.05)
    assert got.deliveries[0].status == wpb.DELIVERY_STATUS_PENDING
    advanced = await dev.post("/sandbox/clock", data={"csrf": token, "by": "2h", "back": "deliveries"})
    assert advanced.status_code == 303 and advanced.headers["location"] == "/sandbox/deliveries"
    shown = await dev.get("/sandbox/deliveries")
    assert 'data-testid="notice">Sandbox clock advanced by 2h: 1 delivery due now<' in shown.text

    # Refused: a span not offered (beside nothing: the error page), live (no such page), no token.
    assert (await dev.post("/sandbox/clock", data={"csrf": token, "by": "8d"})).status_code == 400
    live = await dev.post("/live/clock", data={"csrf": token, "by": "2h"})
    assert live.status_code == 404 and "Sandbox clock advanced" not in live.text
    assert (await dev.post("/sandbox/clock", data={"by": "2h"})).status_code == 403
    await dev.aclose()

    # A viewer neither sees the form nor may post it.
    viewer = await stack.join("clock-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    page = await viewer.get("/sandbox/webhooks")
    assert 'data-testid="sandbox-clock"' not in page.text
    refused = await viewer.post("/sandbox/clock", data={"csrf": csrf_of(page.text), "by": "2h"})
    assert refused.status_code == 403
    await viewer.aclose()


async def test_an_unknown_deliverys_page_is_404_as_an_unknown_events_is(
    stack: Stack, receiver: Receiver
) -> None:
    await _register(stack, receiver.url("/known"), "booking.confirmed")
    event = await _publish(stack, "booking.confirmed")
    await receiver.wait_for(1)
    dora = await stack.join("delivery-404@acme.example", ipb.USER_ROLE_VIEWER)
    listed = await dora.get(f"/sandbox/events/{event.id}")
    known = re.search(r'href="/sandbox/deliveries/(msg_[A-Za-z0-9]+)"', listed.text)[1]  # type: ignore[index]
    assert (await dora.get(f"/sandbox/deliveries/{known}")).status_code == 200
    for path in (
        "/sandbox/deliveries/msg_nosuchdelivery",
        f"/live/deliveries/{known}",
        "/sandbox/deliveries/x",
    ):
        missing = await dora.get(path)
        assert missing.status_code == 404, path
        assert 'data-testid="delivery-facts"' not in missing.text
    assert (await dora.get("/sandbox/events/evt_nosuchevent")).status_code == 404
    await dora.aclose()


async def test_the_clock_keeps_the_delivery_logs_filter(stack: Stack) -> None:
    endpoint = await _register(stack, "http://127.0.0.1:9/filtered", "booking.confirmed")
    dev = await stack.join("clock-filter@acme.example", ipb.USER_ROLE_DEVELOPER)
    log = await dev.get("/sandbox/deliveries", params={"endpoint_id": endpoint, "status": "pending"})
    assert log.status_code == 200
    form = re.search(r'data-testid="sandbox-clock">(.*?)</form>', log.text, re.S)
    assert form, log.text
    back_query = html.unescape(re.search(r'name="back_query" value="([^"]*)"', form[1])[1])  # type: ignore[index]
    advanced = await dev.post(
        "/sandbox/clock",
        data={"csrf": csrf_of(log.text), "by": "1m", "back": "deliveries", "back_query": back_query},
    )
    assert advanced.status_code == 303
    assert advanced.headers["location"] == f"/sandbox/deliveries?endpoint_id={endpoint}&status=pending"
    shown = await dev.get(advanced.headers["location"])
    assert f'name="endpoint_id" value="{endpoint}"' in shown.text
    assert "Sandbox clock advanced by 1m" in shown.text
    # Only the log's own filter fields come back, and only to the log.
    odd = await dev.post(
        "/sandbox/clock",
        data={"csrf": csrf_of(log.text), "by": "1m", "back": "webhooks", "back_query": "endpoint_id=we_x"},
    )
    assert odd.headers["location"] == "/sandbox/webhooks"
    other = await dev.post(
        "/sandbox/clock",
        data={
            "csrf": csrf_of(log.text),
            "by": "1m",
            "back": "deliveries",
            "back_query": "next=//evil.example",
        },
    )
    assert other.headers["location"] == "/sandbox/deliveries"
    await dev.aclose()

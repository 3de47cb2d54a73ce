"""The portal shows a polling endpoint (docs/webhooks.md "Polling"): no URL in the list or on its page, and
its queue instead: batches leased now (about one per active consumer), events waiting, the last poll."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import html
import re
from typing import Any

from tests.integration.portal_stack import (
    Stack,
    stack,  # noqa: F401 (the fixture)
)
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as wpb


def _fact(page: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}">(.*?)</dd>', page, re.S)
    assert found, testid
    return html.unescape(found[1])


async def test_a_polling_endpoint_shows_its_consumers_not_a_url(stack: Stack) -> None:
    scope: dict[str, Any] = {"account_id": stack.account_id, "environment": wpb.ENVIRONMENT_SANDBOX}
    made = await stack.hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            **scope, type=wpb.DESTINATION_TYPE_POLLING, events=["booking.confirmed"], description="agency"
        )
    )
    eid = made.endpoint.id
    owner = await stack.join("owner@acme.example")
    page = (await owner.get(f"/sandbox/webhooks/{eid}")).text
    assert _fact(page, "endpoint-destination") == "polling"  # no URL
    assert _fact(page, "poll-status") == "0 batches leased now (0 events), 0 events waiting; never polled"
    listing = (await owner.get("/sandbox/webhooks")).text
    assert f'href="/sandbox/webhooks/{eid}">polling</a>' in listing
    for n in range(3):
        await stack.hooks.PublishEvent(
            wpb.PublishEventRequest(
                **scope, type="booking.confirmed", data=event_data("booking.confirmed", booking=f"bk_p{n}")
            )
        )
    leased = await stack.hooks.PollEndpoint(
        wpb.PollEndpointRequest(**scope, endpoint_id=eid, limit=2, lease_seconds=600)
    )
    assert len(leased.events) == 2
    status = _fact((await owner.get(f"/sandbox/webhooks/{eid}")).text, "poll-status")
    assert re.fullmatch(
        r"1 batch leased now \(2 events\), 3 events waiting; last polled \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
        status,
    ), status
    await stack.hooks.CommitPoll(wpb.CommitPollRequest(**scope, endpoint_id=eid, cursor=leased.cursor))
    status = _fact((await owner.get(f"/sandbox/webhooks/{eid}")).text, "poll-status")
    assert status.startswith("0 batches leased now (0 events), 1 event waiting; last polled"), status
    await owner.aclose()

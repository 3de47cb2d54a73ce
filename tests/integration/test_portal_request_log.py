"""The portal's Request log page (/<env>/requests) over real HTTP against a real authsvc: newest first,
filtered by key and status class, one request looked up by its id, readable by a viewer (keys.read)."""

from __future__ import annotations

import datetime as dt
import re

from svckit.protos import timestamp as ts
from tests.integration.portal_stack import Stack, stack  # noqa: F401 (the fixture)
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def record(
    account_id: str,
    n: int,
    status: int,
    key_id: str,
    env: apb.Environment.ValueType = apb.ENVIRONMENT_SANDBOX,
) -> apb.RequestRecord:
    return apb.RequestRecord(
        request_id=f"req_{n:024x}",
        account_id=account_id,
        environment=env,
        key_id=key_id,
        key_hint=f"svc_test_...{key_id[-4:]}",
        method="GET",
        path=f"/v1/hotels/{n}",
        status=status,
        error_type="missing_scope" if status == 403 else "",
        latency_ms=10 + n,
        occurred_at=ts(NOW - dt.timedelta(minutes=10 - n)),
    )


def ids(page: str) -> list[str]:
    return re.findall(r'<tr data-request-id="(req_[0-9a-f]+)"', page)


async def test_request_log_page_lists_filters_and_looks_up_by_id(stack: Stack) -> None:  # noqa: F811
    records = [
        record(stack.account_id, 1, 200, "key_aaaa"),
        record(stack.account_id, 2, 403, "key_aaaa"),
        record(stack.account_id, 3, 503, "key_bbbb"),
        record(stack.account_id, 4, 200, "key_bbbb", apb.ENVIRONMENT_LIVE),
    ]
    got = await stack.auth.RecordRequests(apb.RecordRequestsRequest(records=records))
    assert got.recorded == 4
    rid = [r.request_id for r in records]

    viewer = await stack.join("requests-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    try:
        page = await viewer.get("/sandbox/requests")
        assert page.status_code == 200, page.text
        assert 'href="/sandbox/requests">Request log</a>' in page.text
        assert ids(page.text) == [rid[2], rid[1], rid[0]]  # newest first, sandbox only
        assert "missing_scope" in page.text and "/v1/hotels/2" in page.text and "12 ms" in page.text
        assert "svc_test_...aaaa" in page.text

        assert ids((await viewer.get("/sandbox/requests?status=4xx")).text) == [rid[1]]
        assert ids((await viewer.get("/sandbox/requests?status=5xx")).text) == [rid[2]]
        assert ids((await viewer.get("/sandbox/requests?key_id=key_aaaa")).text) == [rid[1], rid[0]]
        assert ids((await viewer.get("/live/requests")).text) == [rid[3]]

        # An id from an error: exactly that request, found from either environment's page.
        found = await viewer.get(f"/sandbox/requests?request_id={rid[1]}")
        assert ids(found.text) == [rid[1]]
        elsewhere = await viewer.get(f"/sandbox/requests?request_id={rid[3]}")
        assert ids(elsewhere.text) == [rid[3]] and "(live)" in elsewhere.text
        missing = await viewer.get(f"/sandbox/requests?request_id=req_{99:024x}")
        assert ids(missing.text) == [] and "No request" in missing.text

        bad = await viewer.get("/sandbox/requests?request_id=nonsense")
        assert bad.status_code == 400 and ids(bad.text) == []
        assert (await viewer.get("/sandbox/requests?status=7xx")).status_code == 400
    finally:
        await viewer.aclose()


async def test_request_log_pages_newest_first(stack: Stack) -> None:  # noqa: F811
    records = [record(stack.account_id, n, 200, "key_cccc") for n in range(1, 31)]
    await stack.auth.RecordRequests(apb.RecordRequestsRequest(records=records))
    owner = await stack.join("requests-owner@acme.example")
    try:
        first = await owner.get("/sandbox/requests")
        link = re.search(r'href="(\?[^"]*)" data-testid="next-page"', first.text)
        assert link is not None
        second = await owner.get("/sandbox/requests" + link[1].replace("&amp;", "&"))
        seen = ids(first.text) + ids(second.text)
        assert seen == [r.request_id for r in reversed(records)]
    finally:
        await owner.aclose()

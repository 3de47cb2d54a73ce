"""The edge's documentation and catalog over real HTTP against real processes: every error's docUrl
resolves on the edge that answered, the docs pages need no key, and /v1/event-types answers the
event catalog."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from tests.integration.edge_stack import Stack, assert_error, auth, hdrs, http, new_key, stack  # noqa: F401 (the fixtures)
from tests.support import ServiceProcess
from travel.auth.v1 import auth_pb2_grpc


# -- issue "partners finish an integration without hitting a wall": docs that resolve, the catalog ----------
async def _resolve_doc_url(stack: Stack, http: httpx.AsyncClient, doc_url: str, env: str) -> str:
    """GET a docUrl on the edge that gave it (the URL names the Host sent, whose port is not the test
    edge's): 200 HTML under a strict CSP, and the fragment is an id of the page. The page's HTML."""
    from urllib.parse import urlsplit

    url = urlsplit(doc_url)
    host = SANDBOX_HOST if env == "sandbox" else LIVE_HOST
    assert (url.scheme, url.netloc, url.path) == ("http", host, "/docs/errors"), doc_url
    page = await http.get(stack.url(env) + url.path, headers={"Host": host})
    assert page.status_code == 200, page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "style-src 'self'" in csp and "script-src" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert f'id="{url.fragment}"' in page.text, url.fragment
    return page.text


@pytest.mark.parametrize("env", ["sandbox", "live"])
async def test_every_doc_url_resolves_on_the_edge_that_answered(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient, env: str
) -> None:
    """Real error answers' docUrls (through the error handler and through a POST's handler), each GET on
    the same edge; every other error type's anchor is on that page too, by the same slug rule."""
    from edge.docsite import slug
    from svckit.errors import ERROR_KINDS

    _, key = await new_key(auth, env, ["hotels:read", "webhooks:write"])
    base = stack.url(env)
    post = hdrs(key.secret, env, Idempotency_Key=f"k-{time.time_ns()}")
    answers = [
        (await http.get(base + "/v1/account", headers=hdrs(None, env)), 401, "missing_api_key"),
        (
            await http.get(base + "/v1/account", headers={**hdrs(None, env), "Authorization": "Svc garbage"}),
            401,
            "invalid_api_key",
        ),
        (await http.get(base + "/v1/account", headers=hdrs(key.secret, env)), 403, "missing_scope"),
        (await http.get(base + "/v1/nothing/here", headers=hdrs(key.secret, env)), 404, "not_found"),
        (
            await http.get(base + "/v1/events?type=bogus", headers=hdrs(key.secret, env)),
            400,
            "invalid_request",
        ),
        # Answered inside the idempotent POST path (the gate's own error response).
        (
            await http.post(base + "/v1/webhooks/endpoints", headers=post, json={"url": 5, "events": []}),
            400,
            "invalid_request",
        ),
        (
            await http.post(base + "/v1/webhooks/endpoints", headers=hdrs(key.secret, env), json={}),
            400,
            "missing_idempotency_key",
        ),
    ]
    page = ""
    for resp, status, etype in answers:
        err = assert_error(resp, status, etype)
        page = await _resolve_doc_url(stack, http, err["docUrl"], env)
    for etype in ERROR_KINDS:
        assert f'<h2 id="{slug(etype)}">{etype}</h2>' in page, etype


async def test_doc_url_of_a_misdirected_request_names_a_served_host_not_the_one_sent(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    resp = await http.get(stack.url() + "/v1/account", headers={"Host": "evil.example"})
    err = assert_error(resp, 421, "misdirected_request")
    assert err["docUrl"].startswith("http://localhost:8080/docs/errors#") and "evil" not in err["docUrl"]


async def test_doc_url_follows_an_explicit_docs_base(
    stack: Stack, http: httpx.AsyncClient, tmp_path: Any
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'edge-docs.db'}"
    targets = (stack.authsvc.grpc_target, stack.webhookd.grpc_target)
    args = edge_args(*targets, db, None, "--docs-base", "https://docs.partner.example/api/")
    other = ServiceProcess("edge", args).start(tmp_path / "edge-docs.log")
    try:
        url = f"http://127.0.0.1:{other.ports['sandbox_port']}/v1/account"
        err = assert_error(await http.get(url, headers=hdrs(None)), 401, "missing_api_key")
        assert err["docUrl"] == "https://docs.partner.example/api/errors#missing_api_key"
    finally:
        other.terminate()


async def test_docs_index_pages_and_stylesheet_need_no_key(stack: Stack, http: httpx.AsyncClient) -> None:
    from edge.docsite import PAGES

    for env, host in (("sandbox", SANDBOX_HOST), ("live", LIVE_HOST)):
        index = await http.get(stack.url(env) + "/docs", headers={"Host": host, "Accept": "text/html"})
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert index.headers["x-request-id"].startswith("req_")
        for name in PAGES:
            assert f'href="/docs/{name}"' in index.text
            page = await http.get(stack.url(env) + f"/docs/{name}", headers={"Host": host})
            assert page.status_code == 200, name
            assert '<link rel="stylesheet" href="/docs/style.css">' in page.text
            assert "<script" not in page.text and " style=" not in page.text
        css = await http.get(stack.url(env) + "/docs/style.css", headers={"Host": host})
        assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
        assert "content-security-policy" in css.headers
    # Links between the pages are served paths.
    edge_page = (await http.get(stack.url() + "/docs/edge", headers={"Host": SANDBOX_HOST})).text
    assert 'href="/docs/errors"' in edge_page and 'href="errors.md"' not in edge_page
    assert_error(await http.get(stack.url() + "/docs/operations", headers=hdrs(None)), 404, "not_found")
    assert_error(await http.get(stack.url() + "/docs/nothing", headers=hdrs(None)), 404, "not_found")
    assert_error(
        await http.get(stack.url() + "/docs/errors", headers={"Host": "x.example"}),
        421,
        "misdirected_request",
    )
    head = await http.head(stack.url() + "/docs/errors", headers={"Host": SANDBOX_HOST})
    assert head.status_code == 200 and head.content == b""


async def test_event_types_answer_the_catalog(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    from jsonschema import Draft202012Validator, FormatChecker

    from svckit.catalog import TEST_KIND
    from svckit.events import EVENT_KINDS

    _, key = await new_key(auth, "sandbox", ["account:read"])
    _, other = await new_key(auth, "sandbox", ["hotels:read"])
    resp = await http.get(stack.url() + "/v1/event-types", headers=hdrs(key.secret))
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-request-id"].startswith("req_")
    body = resp.json()
    assert body["object"] == "list" and body["nextPageToken"] is None
    assert [t["kind"] for t in body["data"]] == [*EVENT_KINDS, TEST_KIND.kind]
    for entry in body["data"]:
        assert set(entry) == {
            "object", "kind", "description", "states", "mode", "subscribable", "schema", "example",
            "references", "thinSchema",
        }  # fmt: skip
        Draft202012Validator(entry["schema"], format_checker=FormatChecker()).validate(entry["example"])
        Draft202012Validator.check_schema(entry["thinSchema"])
        assert set(entry["references"]) <= set(entry["schema"]["properties"])
    one = await http.get(stack.url() + "/v1/event-types/booking.confirmed", headers=hdrs(key.secret))
    assert one.status_code == 200 and one.json() == body["data"][0]
    confirmed = one.json()
    bad = {**confirmed["example"], "madeUp": 1}
    assert not Draft202012Validator(confirmed["schema"]).is_valid(bad)
    assert_error(
        await http.get(stack.url() + "/v1/event-types/booking.lost", headers=hdrs(key.secret)),
        404,
        "not_found",
    )
    assert_error(
        await http.get(stack.url() + "/v1/event-types", headers=hdrs(other.secret)), 403, "missing_scope"
    )
    assert_error(await http.get(stack.url() + "/v1/event-types", headers=hdrs(None)), 401, "missing_api_key")

"""Which error type and status each failure becomes, by table."""

from __future__ import annotations

import pytest
from sanic.exceptions import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    SanicException,
)

from edge.app import _classify
from edge.exceptions import EdgeError, UpstreamUnavailable
from edge.responses import error_body, new_request_id
from svckit.errors import ERROR_KINDS, http_status


@pytest.mark.parametrize(
    ("exc", "etype"),
    [
        (EdgeError("x", type="missing_scope"), "missing_scope"),
        (UpstreamUnavailable("down"), "service_unavailable"),
        (NotFound("nope"), "not_found"),
        (MethodNotAllowed("no", method="PUT", allowed_methods=["GET"]), "not_found"),
        (PayloadTooLarge("big"), "payload_too_large"),
        (BadRequest("bad"), "invalid_request"),
        (RequestTimeout("slow"), "request_timeout"),
        (SanicException("upgrade required", status_code=426), "invalid_request"),
        (RuntimeError("boom"), "internal_error"),
        (SanicException("server", status_code=503), "internal_error"),
    ],
)
def test_classify(exc: BaseException, etype: str) -> None:
    assert _classify(None, exc)[0] == etype


def test_internal_errors_do_not_leak_the_exception_text() -> None:
    assert "boom" not in _classify(None, RuntimeError("boom svc_live_secret"))[1]


@pytest.mark.parametrize("etype", sorted(ERROR_KINDS))
def test_error_body_shape(etype: str) -> None:
    rid = new_request_id()
    body = error_body(etype, "why", rid, "https://docs.example")
    assert body == {
        "error": {
            "type": etype,
            "message": "why",
            "requestId": rid,
            "docUrl": f"https://docs.example/errors#{etype}",
        }
    }
    assert 400 <= http_status(etype) <= 504


def test_request_ids_are_req_and_24_hex() -> None:
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(i.startswith("req_") and len(i) == 28 and int(i[4:], 16) >= 0 for i in ids)

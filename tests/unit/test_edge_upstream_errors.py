"""A product upstream's error answer in the partner API's error shape, by table (edge.upstreamerrors)."""

from __future__ import annotations

import json

import pytest

from edge.upstreamerrors import MAX_BODY, MAX_MESSAGE, MappedError, map_upstream_error
from svckit.errors import ERROR_KINDS, http_status


def body(error: object) -> bytes:
    return json.dumps({"error": error}).encode()


REFUSED_404 = "the hotels service refused the request (HTTP 404)"
REFUSED_400 = "the hotels service refused the request (HTTP 400)"
FAILED = "the hotels service failed to answer (HTTP {}); retry later with the same Idempotency-Key"

CASES = [
    # (why, upstream status, upstream body, mapped)
    (
        "ours: type and message kept",
        404,
        body({"type": "not_found", "message": "no booking 'bk_nope'"}),
        MappedError(404, "not_found", "no booking 'bk_nope'"),
    ),
    (
        "ours, with extra fields and the upstream's own requestId: only type and message taken",
        402,
        body({"type": "credit_exhausted", "message": "no credit", "requestId": "req_theirs", "x": 1}),
        MappedError(402, "credit_exhausted", "no credit"),
    ),
    (
        "ours, status kept even where our table says another",
        400,
        body({"type": "not_found", "message": "m"}),
        MappedError(400, "not_found", "m"),
    ),
    (
        "not ours: upstream_error, status and message kept",
        409,
        body({"type": "room_gone", "message": "the room was sold"}),
        MappedError(409, "upstream_error", "the room was sold"),
    ),
    ("no type", 404, body({"message": "gone"}), MappedError(404, "upstream_error", "gone")),
    ("type not a string", 404, body({"type": 7, "message": "m"}), MappedError(404, "upstream_error", "m")),
    (
        "message not a string: the generic one",
        404,
        body({"type": "not_found", "message": ["x"]}),
        MappedError(404, "not_found", REFUSED_404),
    ),
    (
        "message empty",
        404,
        body({"type": "not_found", "message": ""}),
        MappedError(404, "not_found", REFUSED_404),
    ),
    (
        "message blank",
        404,
        body({"type": "not_found", "message": "   "}),
        MappedError(404, "not_found", REFUSED_404),
    ),
    (
        "message with a control character (a log or terminal injection)",
        404,
        body({"type": "not_found", "message": "a\nb\x1b[31m"}),
        MappedError(404, "not_found", REFUSED_404),
    ),
    (
        "message too long",
        400,
        body({"type": "invalid_request", "message": "x" * (MAX_MESSAGE + 1)}),
        MappedError(400, "invalid_request", REFUSED_400),
    ),
    (
        "message of the longest length kept",
        400,
        body({"type": "invalid_request", "message": "x" * MAX_MESSAGE}),
        MappedError(400, "invalid_request", "x" * MAX_MESSAGE),
    ),
    (
        "printable non-ASCII kept",
        400,
        body({"type": "invalid_request", "message": "nuitée: zéro"}),
        MappedError(400, "invalid_request", "nuitée: zéro"),
    ),
    ("not JSON", 404, b"<html>Not Found</html>", MappedError(404, "upstream_error", REFUSED_404)),
    ("empty body", 400, b"", MappedError(400, "upstream_error", REFUSED_400)),
    ("binary", 400, bytes(range(256)), MappedError(400, "upstream_error", REFUSED_400)),
    ("JSON, not an object", 400, b"[1, 2]", MappedError(400, "upstream_error", REFUSED_400)),
    ("error not an object", 400, b'{"error": "bad"}', MappedError(400, "upstream_error", REFUSED_400)),
    (
        "Sanic's own 404 shape",
        404,
        b'{"description": "Not Found", "status": 404, "message": "Requested URL /x not found"}',
        MappedError(404, "upstream_error", REFUSED_404),
    ),
    (
        "too large to parse",
        400,
        body({"type": "invalid_request", "message": "m", "pad": "x" * MAX_BODY}),
        MappedError(400, "upstream_error", REFUSED_400),
    ),
    (
        "5xx of ours but internal_error: 502, its text never shown",
        500,
        body({"type": "internal_error", "message": "db password wrong at 10.0.0.3"}),
        MappedError(502, "upstream_error", FAILED.format(500)),
    ),
    (
        "5xx not JSON: 502",
        500,
        b"Traceback (most recent call last): ...",
        MappedError(502, "upstream_error", FAILED.format(500)),
    ),
    ("504: 502", 504, b"", MappedError(502, "upstream_error", FAILED.format(504))),
    (
        "503 service_unavailable kept (retry), its text not",
        503,
        body({"type": "service_unavailable", "message": "supplier X down, pool at 10.0.0.9"}),
        MappedError(503, "service_unavailable", "the hotels service is unavailable; retry later"),
    ),
    (
        "503 without our type: 502",
        503,
        b"Service Unavailable",
        MappedError(502, "upstream_error", FAILED.format(503)),
    ),
]


@pytest.mark.parametrize(("why", "status", "upstream", "expected"), CASES, ids=[c[0] for c in CASES])
def test_mapping(why: str, status: int, upstream: bytes, expected: MappedError) -> None:
    assert map_upstream_error(status, upstream, "hotels") == expected


def test_every_mapped_type_is_in_the_table() -> None:
    for _, status, upstream, _expected in CASES:
        mapped = map_upstream_error(status, upstream, "hotels")
        assert mapped.type in ERROR_KINDS
        assert 400 <= mapped.status < 600


def test_upstream_error_is_a_502_of_the_table() -> None:
    assert http_status("upstream_error") == 502

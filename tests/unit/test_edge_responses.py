"""The edge's response type sends the headers Sanic's own would, CR, LF and NUL removed the same way."""

from __future__ import annotations

import pytest
from sanic.response import HTTPResponse
from sanic.response import json as sanic_json

from edge.responses import EdgeResponse, json_response

HEADERS = [
    # (name, value): what a handler might set, including a value a caller injected CR/LF/NUL into
    ("X-Request-Id", "req_0123456789abcdef01234567"),
    ("Content-Type", "application/json"),
    ("Deprecation", "@1767225600"),
    ("X-Injected", "a\r\nSet-Cookie: x=1"),
    ("X-Nul", "before\x00after"),
    ("X-Only-Breaks", "\r\n\r\n"),
    ("X-Lone-Lf", "a\nb"),
    ("X-Bad\rName", "v"),
    ("X-Unicode", "caf\u00e9"),
    ("X-Empty", ""),
]


@pytest.mark.parametrize(("name", "value"), HEADERS, ids=[h[0].replace("\r", "CR") for h in HEADERS])
def test_headers_are_sent_as_sanic_sends_them(name: str, value: str) -> None:
    ours = EdgeResponse(b"{}", headers={name: value}, content_type="application/json")
    theirs = HTTPResponse(b"{}", headers={name: value}, content_type="application/json")
    assert list(ours.processed_headers) == list(theirs.processed_headers)
    for sent_name, sent_value in ours.processed_headers:
        assert not {b"\r", b"\n", b"\x00"} & {bytes([c]) for c in sent_name + sent_value}


def test_json_response_matches_sanics() -> None:
    body = {"object": "list", "data": [{"id": "x/y", "n": 1.5, "ok": None}], "note": "caf\u00e9"}
    ours, theirs = json_response(body, status=201, headers={"X-A": "1"}), sanic_json(body, 201, {"X-A": "1"})
    assert (ours.body, ours.status, ours.content_type) == (theirs.body, theirs.status, theirs.content_type)
    assert list(ours.processed_headers) == list(theirs.processed_headers)

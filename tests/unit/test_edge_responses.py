"""The edge's response type sends the headers Sanic's own would, CR, LF and NUL removed the same way."""

from __future__ import annotations

import os
import re

import pytest
from sanic.response import HTTPResponse
from sanic.response import json as sanic_json

from edge.responses import REQUEST_ID_BATCH, EdgeResponse, json_response, new_request_id

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


MORE_VALUES: list[object] = ["a\tb", "\x1b[31m", "\u2028", 42, 0.5, "\udcff", "x\r", "  padded  "]


@pytest.mark.parametrize("value", MORE_VALUES, ids=[repr(v) for v in MORE_VALUES])
def test_values_not_printable_or_not_str_are_sent_as_sanic_sends_them(value: object) -> None:
    """Values without CR, LF or NUL that are still not printable, and values that are not strings."""
    headers: dict[str, object] = {"X-Value": value}
    ours = EdgeResponse(b"{}", headers=headers, content_type="application/json")  # type: ignore[arg-type]
    theirs = HTTPResponse(b"{}", headers=headers, content_type="application/json")  # type: ignore[arg-type]
    assert list(ours.processed_headers) == list(theirs.processed_headers)


@pytest.mark.parametrize("status", [101, 200, 204, 304, 404])
@pytest.mark.parametrize("content_type", ["application/json", None])
def test_content_type_is_added_where_sanic_adds_it(status: int, content_type: str | None) -> None:
    ours = EdgeResponse(b"", status=status, content_type=content_type)
    theirs = HTTPResponse(b"", status=status, content_type=content_type)
    assert list(ours.processed_headers) == list(theirs.processed_headers)


def test_a_header_name_is_sanitised_every_time_it_is_sent() -> None:
    """The names' memo holds what was sent, never the raw name."""
    for _ in range(3):
        sent = list(EdgeResponse(b"", headers={"X-Bad\r\nName": "v"}).processed_headers)
        assert sent[0] == (b"X-BadName", b"v")


@pytest.mark.parametrize("body", [None, b"raw", "caf\u00e9", bytearray(b"ba")])
def test_the_response_is_made_as_sanics(body: object) -> None:
    ours = EdgeResponse(body, status=201, headers={"X-A": "1"}, content_type="text/plain")
    theirs = HTTPResponse(body, status=201, headers={"X-A": "1"}, content_type="text/plain")
    fields = ("asgi", "body", "content_type", "stream", "status", "_cookies")
    assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert list(ours.headers.items()) == list(theirs.headers.items())


def test_request_ids_across_batches_are_well_formed_and_distinct() -> None:
    ids = [new_request_id() for _ in range(3 * REQUEST_ID_BATCH + 5)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"req_[0-9a-f]{24}", rid) for rid in ids)


def test_a_forked_child_draws_ids_of_its_own() -> None:
    new_request_id()  # the parent holds a batch drawn before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then exit at once
        os.write(write, " ".join(new_request_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = [new_request_id() for _ in range(3)]
    assert len(child) == 3
    assert not set(child) & set(parent)

"""Client input the edge refuses with 400 instead of crashing or mis-routing (issue 8 items 4 and 8):
strict, bounded JSON (edge.jsonbody) and product paths whose matched form is the form sent upstream
(edge.routetable.path_problem). Pure, table-tested."""

from __future__ import annotations

import httpx
import pytest

from edge.jsonbody import MAX_DEPTH, JsonProblem, parse_json
from edge.routetable import RouteTable, RouteTableError, parse_route, path_problem

DEEP = b'{"url":' + b"[" * 5000 + b"]" * 5000 + b"}"


def nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (DEEP, "depth"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "depth"),
        (b'{"a":' * MAX_DEPTH + b"1" + b"}" * MAX_DEPTH + b"x", "syntax"),
        (b'{"url": "http://h/\\ud800", "events": []}', "unicode"),
        (b'{"\\udfff": 1}', "unicode"),  # in a key
        (b'["ok", ["\\ud83d"]]', "unicode"),  # half of an emoji's pair
        ("{\"a\": \"\ud800\"}", "unicode"),  # already a str (a stream text frame)
        (b'{"a": "\xff"}', "unicode"),  # not UTF-8
        (b'\xef\xbb\xbf{"a": 1}', "syntax"),  # a byte order mark
        (b"{", "syntax"),
        (b"NaN", "syntax"),
        (b'{"n": Infinity}', "syntax"),
        (b"1" * 5000, "syntax"),  # over Python's integer digit limit
        (b"", "syntax"),
        # issue 34: a number no JSON encoder writes back is a 400, never a 500 later
        (b'{"n": 1e400}', "syntax"),  # past a double: inf
        (b'[-1e400]', "syntax"),
    ],
    ids=["5000-deep", "limit+1", "bad-after-deep", "lone-surrogate", "surrogate-key", "half-pair", "str",
         "not-utf8", "bom", "truncated", "nan", "infinity", "huge-int", "empty", "past-double",
         "below-double"],
)  # fmt: skip
def test_refused_json(raw: bytes | str, kind: str) -> None:
    with pytest.raises(JsonProblem) as info:
        parse_json(raw)
    assert info.value.kind == kind


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"url": "https://h/\\ud83d\\ude00"}', {"url": "https://h/\U0001f600"}),  # a proper pair
        ('{"d": "caf\u00e9"}'.encode(), {"d": "caf\u00e9"}),
        (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, nested(MAX_DEPTH)),
        (b'{"n": 1.5e300, "b": true, "z": null}', {"n": 1.5e300, "b": True, "z": None}),
        (b"[9223372036854775807, -9223372036854775808, 1e-400]", [2**63 - 1, -(2**63), 0.0]),
        # past 64 bits: read as it is (a field the edge reads has its own range: int_field's 400)
        (b'{"rate_limit": 99999999999999999999}', {"rate_limit": 99999999999999999999}),
    ],
)
def test_accepted_json(raw: bytes, value: object) -> None:
    assert parse_json(raw) == value


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/v1/hotels/bookings/bk_1", None),
        ("/v1/hotels/bookings/bk.1", None),
        ("/v1/hotels/bookings/...", None),  # three dots are a name
        ("/v1/hotels/bookings/%41", None),  # other escapes mean the same to every server
        ("/v1/hotels/bookings/%252e%252e", None),  # decoded once upstream: %2e%2e, a name
        ("/v1/hotels/bookings/..", "a dot segment (. or ..)"),
        ("/v1/hotels/bookings/.", "a dot segment (. or ..)"),
        ("/v1/hotels/../admin", "a dot segment (. or ..)"),
        ("/v1/hotels/bookings/%2e%2e", "a dot segment (. or ..)"),
        ("/v1/hotels/bookings/%2E.", "a dot segment (. or ..)"),
        ("/v1/hotels/bookings/..;x=1", "a dot segment (. or ..)"),
        ("/v1/hotels/bookings/a%2fb", "an encoded slash (%2F or %5C)"),
        ("/v1/hotels/bookings/a%2Fb", "an encoded slash (%2F or %5C)"),
        ("/v1/hotels/bookings/a%5cb", "an encoded slash (%2F or %5C)"),
        ("/v1/hotels/bookings/a\\b", "a backslash"),
    ],
)
def test_path_problem(path: str, problem: str | None) -> None:
    assert path_problem(path) == problem
    if problem is None:
        # What is accepted reaches the upstream as matched (httpx keeps the path as it is).
        assert httpx.URL("http://up.internal" + path).raw_path.decode() == path


ROUTE = {
    "method": "GET",
    "path": "/v1/hotels/bookings/{id}",
    "scope": "hotels:read",
    "upstream": {"live": "http://127.0.0.1:9201", "sandbox": "http://127.0.0.1:9301"},
}


@pytest.mark.parametrize("path", ["/v1/hotels/../x", "/v1/./hotels"])
def test_route_tables_refuse_dot_segments(path: str) -> None:
    with pytest.raises(RouteTableError, match="invalid segment"):
        parse_route({**ROUTE, "path": path})


def test_the_dot_segment_of_the_report_no_longer_reaches_a_route() -> None:
    table = RouteTable.from_json([ROUTE])
    # The route table alone would match it (the parameter takes ".."): path_problem runs first.
    assert table.match("GET", "/v1/hotels/bookings/..") is not None
    assert path_problem("/v1/hotels/bookings/..") is not None

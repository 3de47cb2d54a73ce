"""The request-head rules (edge.requesthead), by table."""

from __future__ import annotations

import pytest

from edge import requesthead
from edge.exceptions import EdgeError
from edge.requesthead import (
    check_fields,
    check_raw_names,
    check_target,
    escape_target,
    head_passes,
    head_too_large,
    names_pass,
)

LIMIT = 8192


@pytest.mark.parametrize(
    ("buffer", "etype"),
    [
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: h\r\n", "uri_too_long"),  # line ends past the limit
        (b"GET /" + b"a" * 9000, "uri_too_long"),  # line not even ended
        (b"GET /" + b"a" * (LIMIT - 14) + b" HTTP/1.1\r\n", "uri_too_long"),  # the line alone is the limit
        (b"GET /" + b"a" * (LIMIT - 15) + b" HTTP/1.1\r\nHost: h", "request_header_fields_too_large"),
        (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 100_000, "request_header_fields_too_large"),
        (b"GET /" + b"a" * 6000 + b" HTTP/1.1\r\nX-B: " + b"b" * 3000, "request_header_fields_too_large"),
    ],
)
def test_an_oversize_head_is_414_or_431(buffer: bytes, etype: str) -> None:
    assert head_too_large(buffer, LIMIT).type == etype


@pytest.mark.parametrize(
    "target",
    [
        "/v1/account",
        "/v1/hotels/search?q=a%20b&x[]=1|2",
        "/",
        "*",
        "http://127.0.0.1:8081/v1/account",
        "HTTPS://api.example.com",
    ],
)
def test_targets_accepted(target: str) -> None:
    check_target(target)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/v1/x\x00y", "percent-encoded"),
        ("/v1/x\x01y", "percent-encoded"),
        ("/v1/x\ty", "percent-encoded"),
        ("/v1/x\x7fy", "percent-encoded"),
        ("/v1/x\udcffy", "percent-encoded"),  # a non-ASCII byte (Sanic decodes with surrogateescape)
        ("/v1/é", "percent-encoded"),
        ("v1/account", "starting with /"),
        ("", "starting with /"),
        ("127.0.0.1:8081", "starting with /"),  # authority form is for CONNECT
    ],
)
def test_targets_refused(target: str, why: str) -> None:
    with pytest.raises(EdgeError) as err:
        check_target(target)
    assert err.value.type == "invalid_request" and why in err.value.message


HOST = ("host", "127.0.0.1:8081")
AUTH = ("authorization", "Svc svc_test_x")


@pytest.mark.parametrize(
    ("fields", "target"),
    [
        ([HOST, AUTH, ("accept", "*/*")], "/v1/account"),
        ([HOST, ("x-forwarded-for", "10.0.0.1"), ("x-forwarded-for", "10.0.0.2")], "/"),  # lists may repeat
        ([HOST, ("accept", "a"), ("accept", "b")], "/"),
        ([HOST, ("user-agent", "tab\tinside and obs-text \udce9")], "/"),
        ([HOST], "http://127.0.0.1:8081/v1/account"),
        ([("host", "API.Example.com")], "https://api.example.com/v1"),
        ([], "/"),  # no Host: the gate's 421 decides
    ],
)
def test_fields_accepted(fields: list[tuple[str, str]], target: str) -> None:
    check_fields(fields, target)
    # The raw-head fast path lets an origin-form request through; the others go to check_fields.
    assert head_passes(raw_head(fields, target), names(fields), target) is target.startswith("/")


def raw_head(fields: list[tuple[str, str]], target: str, case: str = "title") -> bytes:
    """The head as received (no final blank line); names in ``case`` as clients vary it."""
    lines = [f"GET {target} HTTP/1.1", *(f"{getattr(n, case)()}: {v}" for n, v in fields)]
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")


def names(fields: list[tuple[str, str]]) -> list[str]:
    """The field names as Sanic's parser gives them to head_passes (lower-cased, in order)."""
    return [n.lower() for n, _ in fields]


@pytest.mark.parametrize(
    ("fields", "target", "message"),
    [
        ([HOST, HOST], "/", "the Host header is sent more than once"),
        ([HOST, ("host", "other:1")], "/", "the Host header is sent more than once"),
        ([HOST, AUTH, AUTH], "/", "the Authorization header is sent more than once"),
        (
            [HOST, ("idempotency-key", "a"), ("idempotency-key", "b")],
            "/",
            "the Idempotency-Key header is sent more than once",
        ),
        (
            [HOST, ("x-partner-customer-ref", "a"), ("x-partner-customer-ref", "a")],
            "/",
            "the X-Partner-Customer-Ref header is sent more than once",
        ),
        ([HOST], "http://evil.example/v1/account", "authority differs from the Host"),
        ([HOST], "http://127.0.0.1:8080/v1/account", "authority differs from the Host"),
        ([HOST], "http://u@127.0.0.1:8081/v1/account", "authority differs from the Host"),
        ([], "http://127.0.0.1:8081/", "authority differs from the Host"),
        ([HOST, ("host ", "x")], "/", "field name 'host' is malformed"),  # space before the colon
        ([HOST, (" folded", "x")], "/", "field name 'folded' is malformed"),
        ([HOST, ("x-a", "a\x00b")], "/", "the x-a header contains a control character"),
        ([HOST, ("x-a", "a\nInjected: 1")], "/", "the x-a header contains a control character"),
        ([HOST, ("x-a", "a\rb")], "/", "the x-a header contains a control character"),
    ],
)
def test_fields_refused(fields: list[tuple[str, str]], target: str, message: str) -> None:
    with pytest.raises(EdgeError) as err:
        check_fields(fields, target)
    assert err.value.type == "invalid_request" and message in err.value.message
    # The fast path never lets a refused head through, whatever the case of its names.
    for case in ("lower", "upper", "title"):
        assert not head_passes(raw_head(fields, target, case), names(fields), target)


@pytest.mark.parametrize(
    ("target", "escaped"),
    [
        ("/v1/x\x00y", "/v1/x%00y"),
        ("/a b\x7f", "/a%20b%7F"),
        ("/x\udcff", "/x%FF"),
        ("/fine?a=1", "/fine?a=1"),
    ],
)
def test_escape_target(target: str, escaped: str) -> None:
    assert escape_target(target) == escaped


@pytest.mark.parametrize(
    ("head", "names"),
    [
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x0bb", ["host", "x-a"]),  # a control character
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f", ["host", "x-a"]),  # DEL
        (b"GET / HTTP/1.1\r\nHost: h\rX-A: a", ["host"]),  # a bare CR inside a line
        (b"GET / HTTP/1.1\r\nHost: h\nX-A: a", ["host"]),  # a bare LF inside a line
        (b"GET / HTTP/1.1\r\nHost: h\r\n: a", ["host", ""]),  # an empty name
        (b"GET / HTTP/1.1\r\nHost: h\r\nX\xc3\xa9: a", ["host", "x\u00e9"]),  # a non-ASCII name
        (b"GET / HTTP/1.1\r\nHost: h\r\nX(a): a", ["host", "x(a)"]),  # a separator in a name
    ],
)
def test_fast_check_refuses(head: bytes, names: list[str]) -> None:
    assert not head_passes(head, names, "/")


def test_fast_check_allows_tab_and_obs_text_in_values_and_repeated_list_fields() -> None:
    head = b"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\tb \xe9\r\nAccept: a\r\nAccept: b"
    assert head_passes(head, ["host", "x-a", "accept", "accept"], "/")


def test_a_name_sequence_that_passed_is_remembered_and_the_memory_is_bounded() -> None:
    requesthead._names_passed.clear()
    assert names_pass(":host::accept:")
    assert ":host::accept:" in requesthead._names_passed
    assert names_pass(":host::accept:")  # from memory
    assert not names_pass(":host::host:") and ":host::host:" not in requesthead._names_passed
    assert not names_pass("::") and not names_pass(":host:::")  # an empty name
    for i in range(requesthead.MAX_NAME_SEQUENCES + 10):
        assert names_pass(f":host::x-{i}:")
    assert len(requesthead._names_passed) == requesthead.MAX_NAME_SEQUENCES
    assert not names_pass(":x-0::authorization::authorization:")  # still checked when full
    requesthead._names_passed.clear()
    long = ":" + "x" * requesthead.MAX_NAME_SEQUENCE_CHARS + ":"
    assert names_pass(long) and long not in requesthead._names_passed  # checked, not remembered
    requesthead._names_passed.clear()


@pytest.mark.parametrize(
    "head",
    [
        "GET / HTTP/1.1\r\nHost: h\r\nIdempotency-\u212aey: k1".encode(),  # Kelvin sign: "k" once lower-cased
        "GET / HTTP/1.1\r\nHost: h\r\nX-N\u00e4me: v".encode(),
        b"GET / HTTP/1.1\r\nHost: h\r\nX-\xffName: v",
    ],
)
def test_a_name_that_is_not_ascii_as_sent_is_refused(head: bytes) -> None:
    """edge.server checks the raw names of every head that is not ASCII, whatever head_passes said."""
    with pytest.raises(EdgeError, match="header field name"):
        check_raw_names(head)


def test_obs_text_in_a_value_is_not_a_name() -> None:
    check_raw_names("GET / HTTP/1.1\r\nHost: h\r\nX-Note: caf\u00e9 \u212a".encode())

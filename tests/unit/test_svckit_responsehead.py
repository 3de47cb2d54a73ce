"""svckit.responsehead: which response heads are read without h11, and what is read from them."""

from __future__ import annotations

import pytest

from svckit.responsehead import PlainHead, plain_head

CT = (b"Content-Type", b"application/json")


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n",
            (200, [CT, (b"Content-Length", b"2")], 2, False),
        ),
        (b"HTTP/1.1 404 \r\ncontent-length:0\r\n", (404, [(b"content-length", b"0")], 0, False)),
        (
            b"HTTP/1.1 201\r\nContent-Length:  7 \t\r\nX-A: a  b\r\n",
            (201, [(b"Content-Length", b"7"), (b"X-A", b"a  b")], 7, False),
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-Empty:\r\nContent-Length: 1\r\n",
            (200, [(b"X-Empty", b""), (b"Content-Length", b"1")], 1, False),
        ),
        (
            b"HTTP/1.1 503 x\r\nConnection: close\r\nContent-Length: 1\r\n",
            (503, [(b"Connection", b"close"), (b"Content-Length", b"1")], 1, True),
        ),
        (
            b"HTTP/1.1 200 OK\r\nconnection: Keep-Alive, Close\r\nContent-Length: 1\r\n",
            (200, [(b"connection", b"Keep-Alive, Close"), (b"Content-Length", b"1")], 1, True),
        ),
        (
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n",
            (200, [(b"Connection", b"keep-alive"), (b"Content-Length", b"1")], 1, False),
        ),
        # Left to h11: other framings, interim answers, other versions, anything malformed.
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", None),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n", None),
        (b"HTTP/1.1 200 OK\r\nX-A: 1\r\n", None),  # close-delimited
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n", None),
        (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n", None),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n", None),
        (b"HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n", None),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n", None),
        (b"HTTP/2 200 OK\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 600 OK\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 20 OK\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 200 OK\nContent-Length: 1\r\n", None),  # bare LF
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: 1\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n folded\r\n", None),  # obsolete line folding
        (b"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n", None),  # space before the colon
        (b"HTTP/1.1 200 OK\r\nBad Name: 1\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 200 OK\r\nX-A: a\x7fb\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 200 O\x00K\r\nContent-Length: 1\r\n", None),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1", None),  # not ending in CRLF
        (b"", None),
    ],
)
def test_plain_head(head: bytes, expected: PlainHead | None) -> None:
    assert plain_head(head) == expected

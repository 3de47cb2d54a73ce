"""Response helpers: the edge's response type, the error body, request ids, JSON."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Iterator
from typing import Any

from multidict import istr
from sanic.compat import Header
from sanic.helpers import json_dumps
from sanic.response import HTTPResponse

from svckit.errors import http_status
from svckit.frameworks import HEADER_TRANSLATION_TABLE, STATUS_LINES
from svckit.ids import Batched
from svckit.outage import RETRY_AFTER

__all__ = [
    "EdgeResponse",
    "error_body",
    "error_response",
    "json_response",
    "new_request_id",
    "response_head",
]

# Header names as multidict keys: a look-up or insert with an ``istr`` skips folding the name's case.
CONTENT_TYPE = istr("content-type")
X_REQUEST_ID = istr("X-Request-Id")
CONTENT_LENGTH = istr("content-length")
CONNECTION = istr("connection")
TRANSFER_ENCODING = istr("transfer-encoding")
# Statuses whose head Sanic writes as any other's: from 200, but for no body (204, 304) and entity
# fields removed (304, 412). Sanic shapes the others apart (1xx, and below 200 it refuses).
_PLAIN_STATUSES = frozenset(range(200, 1000)) - {204, 304, 412}

# Request ids made REQUEST_ID_BATCH at a time from one draw (``svckit.ids.Batched``): one drawn and
# formatted alone cost about 3,700 instructions.
REQUEST_ID_BATCH = 256
_rid_random = random.Random()


def _request_ids(count: int) -> list[str]:
    digits = f"{_rid_random.getrandbits(96 * count):0{24 * count}x}"
    return ["req_" + digits[at : at + 24] for at in range(0, 24 * count, 24)]


# ``req_`` + 24 hex characters (96 random bits), as ``svckit.ids.new_request_id`` makes them: an
# identifier, not a secret.
new_request_id = Batched(_request_ids, REQUEST_ID_BATCH).take


def _forget_request_ids() -> None:
    """In a forked child: not the parent's generator state (no shared ids; ``Batched`` drops the rest)."""
    _rid_random.seed()


os.register_at_fork(after_in_child=_forget_request_ids)

# Header names already checked and encoded by EdgeResponse.processed_headers, at most MAX_HEADER_NAMES.
MAX_HEADER_NAMES = 256
_header_names: dict[str, bytes] = {}


class EdgeResponse(HTTPResponse):
    """Every response the edge makes. Sanic removes CR, LF and NUL from each header name and value it
    sends with ``str.translate``, a table look-up per character: 0.5-1 us a header, five headers a
    response, a tenth of the CPU of a cached GET /v1/account. Here the same characters are removed, after
    a search for them that finds none in the usual header (0.1 us)."""

    __slots__ = ()

    def __init__(
        self,
        body: Any = None,
        status: int = 200,
        headers: Header | dict[str, str] | None = None,
        content_type: str | None = None,
    ) -> None:
        # HTTPResponse.__init__ in one step: it first runs BaseHTTPResponse's, which makes a Header of
        # its own only for it to be replaced (a multidict made and dropped per response).
        self.asgi = False
        self.content_type = content_type
        self.body = b"" if body is None else body.encode() if hasattr(body, "encode") else body
        self.stream = None
        self.status = status
        self.headers = Header(headers or {})
        self._cookies = None

    @staticmethod
    def _sanitize_header_value(value: str) -> str:
        if "\r" in value or "\n" in value or "\x00" in value:
            return value.translate(HEADER_TRANSLATION_TABLE)
        return value

    @property
    def processed_headers(self) -> Iterator[tuple[bytes, bytes]]:
        """Sanic's ``processed_headers`` without a method call per name and value: a name's bytes are
        remembered (a response has the same few names), a value is translated only when not printable
        (CR, LF and NUL are not; translating a value without them changes nothing)."""
        headers = self.headers
        status = self.status
        if status != 204 and status != 304 and not 100 <= status < 200:  # sanic.helpers.has_message_body
            headers.setdefault(CONTENT_TYPE, self.content_type)
        out = []
        for name, value in headers.items():
            raw = _header_names.get(name)
            if raw is None:
                raw = _header_name(name)
            text = value if value.__class__ is str else f"{value}"
            if not text.isprintable():
                text = text.translate(HEADER_TRANSLATION_TABLE)
            out.append((raw, text.encode("utf-8", "surrogateescape")))
        return iter(out)


def response_head(
    status: int, headers: Header, content_type: str | None, size: int, keep_alive: bool
) -> bytes | None:
    """The status line and fields Sanic's HTTP/1.1 writer (``Http.http1_response_header``) sends before a
    whole body of ``size`` bytes, byte for byte: the response's own fields in order, then content-length,
    connection and, unless the response has one, content-type. Built as one string and encoded once,
    where Sanic writes content-length and connection into the response's multidict, then formats and
    concatenates each field apart: a tenth of a cached GET's instructions (callgrind: 224,100 -> 202,800).

    None when Sanic must write it: a status it treats apart (not in ``_PLAIN_STATUSES``, or not an int),
    fields it would replace (content-length, connection, transfer-encoding), or a name or value it would
    change or refuse (CR, LF or NUL, which it removes; anything not ASCII)."""
    if status.__class__ is not int or status not in _PLAIN_STATUSES:
        return None
    if CONTENT_LENGTH in headers or CONNECTION in headers or TRANSFER_ENCODING in headers:
        return None
    lines = [f"{name}: {value}\r\n" for name, value in headers.items()]
    lines.append(f"content-length: {size}\r\n")
    lines.append("connection: keep-alive\r\n" if keep_alive else "connection: close\r\n")
    if CONTENT_TYPE not in headers:
        lines.append(f"content-type: {content_type}\r\n")
    fields = "".join(lines)
    count = len(lines)
    # Exactly one CR and one LF a line (its end), no NUL: no name or value holds one.
    if not fields.isascii() or fields.count("\r") != count or fields.count("\n") != count or "\x00" in fields:
        return None
    return STATUS_LINES[status] + fields.encode("ascii") + b"\r\n"


def _header_name(name: str) -> bytes:
    raw = name.translate(HEADER_TRANSLATION_TABLE).encode("ascii")
    if len(_header_names) < MAX_HEADER_NAMES:
        _header_names[name] = raw
    return raw


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> EdgeResponse:
    """``body`` as JSON, serialised as Sanic's ``json`` does."""
    return EdgeResponse(json_dumps(body), status=status, headers=headers, content_type="application/json")


def error_body(error_type: str, message: str, request_id: str, docs_base: str) -> dict[str, object]:
    return {
        "error": {
            "type": error_type,
            "message": message,
            "requestId": request_id,
            "docUrl": f"{docs_base}/errors#{error_type}",
        }
    }


def error_response(
    error_type: str,
    message: str,
    request_id: str,
    docs_base: str,
    headers: Iterable[tuple[str, str]] = (),
) -> HTTPResponse:
    hdrs = {"X-Request-Id": request_id, **dict(headers)}
    if error_type == "rate_limited":
        hdrs.setdefault("Retry-After", "1")
    elif error_type == "service_unavailable":
        hdrs.setdefault("Retry-After", str(RETRY_AFTER))
    return json_response(
        error_body(error_type, message, request_id, docs_base), status=http_status(error_type), headers=hdrs
    )

"""Response helpers: the edge's response type, the error body, request ids, JSON."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sanic.helpers import json_dumps
from sanic.response import HTTPResponse
from sanic.response.types import HEADER_TRANSLATION_TABLE

from svckit.errors import http_status
from svckit.ids import new_request_id

__all__ = ["EdgeResponse", "error_body", "error_response", "json_response", "new_request_id"]


class EdgeResponse(HTTPResponse):
    """Every response the edge makes. Sanic removes CR, LF and NUL from each header name and value it
    sends with ``str.translate``, a table look-up per character: 0.5-1 us a header, five headers a
    response, a tenth of the CPU of a cached GET /v1/account. Here the same characters are removed, after
    a search for them that finds none in the usual header (0.1 us)."""

    __slots__ = ()

    @staticmethod
    def _sanitize_header_value(value: str) -> str:
        if "\r" in value or "\n" in value or "\x00" in value:
            return value.translate(HEADER_TRANSLATION_TABLE)
        return value


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
    return json_response(
        error_body(error_type, message, request_id, docs_base), status=http_status(error_type), headers=hdrs
    )

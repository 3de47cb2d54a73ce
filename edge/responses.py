"""Response helpers: the error body, request ids, JSON."""

from __future__ import annotations

from collections.abc import Iterable

from sanic.response import HTTPResponse
from sanic.response import json as json_response

from svckit.errors import http_status
from svckit.ids import new_request_id

__all__ = ["error_body", "error_response", "new_request_id"]


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

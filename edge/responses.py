"""Response helpers: the error body, request ids, JSON."""

from __future__ import annotations

import random
from collections.abc import Iterable

from sanic.response import HTTPResponse
from sanic.response import json as json_response

from svckit.errors import http_status

_random = random.Random()


def new_request_id() -> str:
    # req_ + 24 hex characters (96 bits; hex is a subset of svckit.ids' base62 alphabet). A request id
    # is an identifier, not a secret: a fast PRNG is enough and keeps it off the per-request syscall path.
    return f"req_{_random.getrandbits(96):024x}"


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

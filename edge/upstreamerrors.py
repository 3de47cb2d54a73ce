"""A product upstream's error answer in the partner API's one error shape (docs/errors.md
"upstream_error", docs/product-services.md "Errors").

A product service answers errors as ``{"error": {"type", "message"}}`` with a type of the error table
(svckit.errors.ERROR_KINDS). The edge passes a success body on untouched, but an error (4xx or 5xx) is
rebuilt: the partner gets ``{"error": {"type", "message", "requestId", "docUrl"}}`` with the edge's
request id and a docUrl as for any other error, whatever the upstream sent.

Rules, in order (``map_upstream_error``):
  1. 4xx, a JSON error body whose ``type`` is one of ours  -> that status and type
  2. 4xx, anything else (another type, no type, not JSON)   -> that status, ``upstream_error``
  3. 503 ``service_unavailable``                            -> 503 ``service_unavailable``
  4. any other 5xx                                          -> 502 ``upstream_error``
The message is the upstream's when it is printable text of at most MAX_MESSAGE characters, on a 4xx only;
otherwise a generic one naming the product. Why never a 5xx's own text and status (as Stripe): a fault
behind the edge is ours to log, not the partner's to read; its text may name internals, and 502 says
that it was the product service, not the request, that failed. A body over MAX_BODY bytes is not parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from svckit.errors import ERROR_KINDS

__all__ = ["MAX_BODY", "MAX_MESSAGE", "UPSTREAM_ERROR", "MappedError", "map_upstream_error"]

UPSTREAM_ERROR = "upstream_error"
# The longest upstream message passed on (characters), and the largest error body parsed (bytes).
MAX_MESSAGE = 500
MAX_BODY = 16_384


@dataclass(frozen=True, slots=True)
class MappedError:
    status: int
    type: str
    message: str


def map_upstream_error(status: int, body: bytes, product: str) -> MappedError:
    """The partner's error for an upstream answer of ``status`` (400 and up) with ``body``, from the
    ``product`` service (``hotels``). Pure."""
    if status >= 500:
        if status == 503 and _error_of(body)[0] == "service_unavailable":
            return MappedError(
                503, "service_unavailable", f"the {product} service is unavailable; retry later"
            )
        failed = f"the {product} service failed to answer (HTTP {status})"
        return MappedError(502, UPSTREAM_ERROR, failed + "; retry later with the same Idempotency-Key")
    error_type, message = _error_of(body)
    if error_type not in ERROR_KINDS:
        error_type = UPSTREAM_ERROR
    if not _safe(message):
        message = f"the {product} service refused the request (HTTP {status})"
    return MappedError(status, error_type, message)


def _error_of(body: bytes) -> tuple[str, str]:
    """(type, message) of a ``{"error": {"type", "message"}}`` body; "" for each that is missing."""
    if not body or len(body) > MAX_BODY:
        return "", ""
    try:
        parsed = json.loads(body)
    except ValueError:  # not JSON, or not UTF-8
        return "", ""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return "", ""
    error_type, message = error.get("type"), error.get("message")
    return (
        error_type if isinstance(error_type, str) else "",
        message if isinstance(message, str) else "",
    )


def _safe(message: str) -> bool:
    return 0 < len(message) <= MAX_MESSAGE and message.isprintable() and not message.isspace()

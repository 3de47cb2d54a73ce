"""Authorize answers kept for reuse: what one holds, what it is kept by, and the metric and proto pieces
shared by every answer with the same values."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
from typing import Any

from google.protobuf import duration_pb2

from authsvc._decision import Decision
from authsvc._lastused import RESOLUTION
from authsvc._metrics import AUTHORIZE_DECISIONS
from authsvc._model import KeyGrant
from svckit.metrics import LoopCount
from travel.auth.v1 import auth_pb2 as pb

# What an answer is kept by (shape_of).
Shape = tuple[bytes, int, str, str, bool]

# Kept Authorize answers (one per key and request shape: environment, scope, source, write); past this
# many the least recently used makes room (cachetools' LRUCache).
MAX_KEPT_ANSWERS = 10_000
# A kept answer records a use of its key at most this often (seconds): as often as LastUsed remembers one.
TOUCH_INTERVAL = RESOLUTION.total_seconds()


@functools.cache
def decisions_of(allowed: bool, error_type: str) -> Any:
    """The AUTHORIZE_DECISIONS child of one answer (a few dozen at most: error types are a fixed table)."""
    return AUTHORIZE_DECISIONS.labels("allow" if allowed else "deny", error_type)


@functools.lru_cache(maxsize=64)
def duration_of(seconds: float) -> duration_pb2.Duration:
    """The cache_ttl message of a TTL (copied into each answer, never changed)."""
    return duration_pb2.Duration(seconds=int(seconds), nanos=int((seconds % 1) * 1e9))


@dataclasses.dataclass(slots=True)
class Answer:
    """An Authorize answer: the grant it was decided for (None for no key or an unknown one), the decision
    and the response but for the key's last use; the response with the last use it last showed. A kept
    answer (``reusable``) also holds the key cache generation it was decided in, until when (monotonic)
    it may be given, and when it next records a use of the key."""

    grant: KeyGrant | None
    decision: Decision
    response: pb.AuthorizeResponse
    counted: LoopCount
    shown_use: dt.datetime | None = None
    stamped: pb.AuthorizeResponse | None = None
    generation: int = -1
    until: float = 0.0
    touch_at: float = 0.0


def shape_of(request: pb.AuthorizeRequest) -> Shape:
    """What an Authorize answer is kept by: the key's BLAKE2b digest (never the key; BLAKE2 is Python's own,
    which under load costs half of OpenSSL's SHA-256 per call) and the other request fields."""
    return (
        hashlib.blake2b(request.api_key.encode(), digest_size=32).digest(),
        request.environment,
        request.required_scope,
        request.source_address,
        request.is_write,
    )

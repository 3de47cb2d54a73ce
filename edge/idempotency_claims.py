"""Who may run a request under an Idempotency-Key: the pure rule over the key's stored record (no I/O).

A record is a claim (``running``) or a stored answer (``done``). A claim carries its owner (the edge
process that runs it) and a heartbeat: the owner refreshes ``heartbeat_at`` every ``HEARTBEAT_SECONDS``
while the request runs (``edge.idempotency``). A claim whose heartbeat is older than
``TAKEOVER_SECONDS`` (three missed beats, and one more for a slow write) belongs to a process that died
and is taken over, so a retry after an edge was killed runs within seconds rather than minutes; a live
owner's claim never is, so two live edges never run one key at once. A claim written by a release
before heartbeats (no owner) is taken over as then, ``LEGACY_STALE_SECONDS`` after it was made.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

RETENTION_SECONDS = 24 * 3600
HEARTBEAT_SECONDS = 2.0
TAKEOVER_SECONDS = 4 * HEARTBEAT_SECONDS
LEGACY_STALE_SECONDS = 120.0


class Verdict(enum.Enum):
    CLAIM = "claim"  # no record: the caller's now
    EXPIRED = "expired"  # a record past its 24 h: removed, then the caller's
    REPLAY = "replay"  # the same request's stored answer
    REUSED = "reused"  # another request under this key: 422 idempotency_key_reused
    IN_USE = "in_use"  # the same request, running under a live owner: 409 idempotency_key_in_use
    TAKE_OVER = "take_over"  # the same request, its owner dead: the caller's now


@dataclass(frozen=True, slots=True)
class Record:
    request_hash: str
    state: str  # "running" or "done"
    created_at: float
    claimed_at: float
    owner: str | None = None
    heartbeat_at: float | None = None


def last_sign_of_life(record: Record) -> float:
    """When the claim's owner last showed it runs (a legacy claim: when it was made)."""
    return record.heartbeat_at if record.owner and record.heartbeat_at is not None else record.claimed_at


def takeover_at(record: Record) -> float:
    """When a running claim may be taken over if its owner shows no sign of life before then."""
    bound = TAKEOVER_SECONDS if record.owner and record.heartbeat_at is not None else LEGACY_STALE_SECONDS
    return last_sign_of_life(record) + bound


def verdict(record: Record | None, request_hash: str, now: float) -> Verdict:
    if record is None:
        return Verdict.CLAIM
    if record.created_at + RETENTION_SECONDS <= now:
        return Verdict.EXPIRED
    if record.request_hash != request_hash:
        return Verdict.REUSED
    if record.state != "running":
        return Verdict.REPLAY
    return Verdict.TAKE_OVER if takeover_at(record) < now else Verdict.IN_USE


def retry_after(record: Record, now: float) -> int:
    """Whole seconds until a claim in use could be taken over (at least 1): a retry then either gets the
    stored answer or runs."""
    return max(1, math.ceil(takeover_at(record) - now))

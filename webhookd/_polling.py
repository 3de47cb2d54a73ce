"""Pure: the rules of polling endpoints (docs/webhooks.md "Polling"), no I/O, ``now`` passed in.

A poll leases a batch of the endpoint's pending deliveries for ``lease`` seconds and answers a cursor, the
lease's id: a random id (``pcur_`` + 32 base62, 190 bits) stored with the endpoint, account and environment
it was issued for. A cursor is opaque and tamper-evident because it is only a key: any change to it names
no lease, and a lease is only ever found again under the scope it was issued in. Why not a signed token:
a random id needs no key shared between webhookd processes and can be answered "committed" or "expired"
from the one row, which a signature alone cannot say.

``poll_bounds`` checks a poll's parameters (each refusal names the parameter); ``commit_verdict`` decides
what a commit of a cursor does. Commits are idempotent: the same cursor committed twice answers what the
first commit did (a consumer that lost the answer retries safely).
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

DEFAULT_LIMIT = 100
MAX_LIMIT = 500
DEFAULT_LEASE = dt.timedelta(seconds=30)
MIN_LEASE = dt.timedelta(seconds=1)
MAX_LEASE = dt.timedelta(minutes=15)
CURSOR_PREFIX = "pcur"
CURSOR_LENGTH = 32
# A lease row is kept this long after it ran out (a late commit is told "expired", not "unknown").
LEASE_KEPT = dt.timedelta(days=1)
# An empty poll records the endpoint's last poll at most this often (no write per idle poll).
LAST_POLLED_EVERY = dt.timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Bounds:
    limit: int
    lease: dt.timedelta


class BadParameter(ValueError):
    """A poll parameter out of its range; ``field`` names it (``limit``, ``leaseSeconds``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def poll_bounds(limit: int, lease_seconds: int) -> Bounds:
    """A poll's limit and lease; 0 means the default. Raises ``BadParameter`` naming the bad one."""
    if limit < 0 or limit > MAX_LIMIT:
        raise BadParameter("limit", f"limit: must be between 1 and {MAX_LIMIT} (default {DEFAULT_LIMIT})")
    low, high = int(MIN_LEASE.total_seconds()), int(MAX_LEASE.total_seconds())
    if lease_seconds < 0 or lease_seconds > high:
        raise BadParameter(
            "leaseSeconds",
            f"leaseSeconds: must be between {low} and {high} (default {int(DEFAULT_LEASE.total_seconds())})",
        )
    return Bounds(
        limit or DEFAULT_LIMIT, dt.timedelta(seconds=lease_seconds) if lease_seconds else DEFAULT_LEASE
    )


def is_cursor(value: str) -> bool:
    """Whether ``value`` has a cursor's shape (anything else is refused before storage is asked)."""
    head, _, tail = value.partition("_")
    return head == CURSOR_PREFIX and len(tail) == CURSOR_LENGTH and tail.isascii() and tail.isalnum()


@dataclass(frozen=True, slots=True)
class Lease:
    """A stored lease, as a commit sees it."""

    endpoint_id: str
    account_id: str
    environment: str
    expires_at: dt.datetime
    committed_at: dt.datetime | None


class Verdict(enum.Enum):
    COMMIT = "commit"  # end the lease's deliveries now
    ALREADY = "already"  # committed before: answer what that commit did, change nothing
    UNKNOWN = "unknown"  # no such cursor in this scope (made up, altered, another account's, long gone)
    FOREIGN = "foreign"  # issued for another endpoint of the same account and environment
    EXPIRED = "expired"  # its lease ran out: the batch is (or will be) offered to another poll


def commit_verdict(
    lease: Lease | None, endpoint_id: str, account_id: str, environment: str, now: dt.datetime
) -> Verdict:
    """What a commit of a cursor to ``endpoint_id`` in the scope (``account_id``, ``environment``) does,
    given the lease the cursor names (None: none). Another scope's lease is UNKNOWN, never FOREIGN: an
    account learns nothing about another's cursors. A committed lease stays ALREADY after it ran out; an
    uncommitted one is EXPIRED from its expiry on (the moment a poll may lease its deliveries again)."""
    if lease is None or lease.account_id != account_id or lease.environment != environment:
        return Verdict.UNKNOWN
    if lease.endpoint_id != endpoint_id:
        return Verdict.FOREIGN
    if lease.committed_at is not None:
        return Verdict.ALREADY
    if now >= lease.expires_at:
        return Verdict.EXPIRED
    return Verdict.COMMIT

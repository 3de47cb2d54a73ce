"""What webhookd stores, as plain records, and the storage port (a Protocol) the service uses.
``_sql.SqlRepository`` is the adapter behind it; every write to the deliveries table goes through its
``Queue`` (``webhookd._queue``), which the worker talks to directly."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, DeliveryStatus, DestinationType, EndpointStatus, PayloadMode
from webhookd._destination_settings import Settings
from webhookd._ed25519 import signer
from webhookd._receiver_auth import ReceiverAuth


@dataclass(frozen=True, slots=True)
class SigningSecret:
    secret: str
    # None: the current secret. Otherwise the end of its rotation overlap.
    expires_at: dt.datetime | None = None
    # The ed25519 key made with it (``_ed25519``, Standard Webhooks ``v1a``); "" for secrets made before.
    signing_key: str = ""

    def __repr__(self) -> str:  # never print a secret by accident
        return f"SigningSecret(expires_at={self.expires_at!r})"


@dataclass(slots=True)
class EndpointRecord:
    id: str
    account_id: str
    environment: str
    url: str
    events: list[str]
    description: str
    status: EndpointStatus
    disabled_reason: str
    created_at: dt.datetime
    updated_at: dt.datetime
    secrets: list[SigningSecret] = field(repr=False)
    signature_scheme: SignatureScheme = SignatureScheme.STRIPE
    # The endpoint.failing level last announced (``_health``); read, never written through the record.
    failing_level: int = 0
    # Whether its deliveries wait for each other (``_ordering``).
    ordering: DeliveryOrder = DeliveryOrder.UNORDERED
    # The content filter (parsed JSON, svckit.jsonmatch; None: every event of its kinds), when it was
    # last set or cleared (None: never since creation), and what its deliveries carry.
    filter: Any = None
    filter_updated_at: dt.datetime | None = None
    payload: PayloadMode = PayloadMode.FULL
    # Where its deliveries go (``_destinations``) and that type's settings (None for http and polling),
    # credentials included: never printed (``_destination_settings``).
    destination_type: DestinationType = DestinationType.HTTP
    destination: Settings | None = field(default=None, repr=False)
    # How its receiver authenticates us (``_receiver_auth``): a client certificate, OAuth2, headers.
    receiver_auth: ReceiverAuth | None = field(default=None, repr=False)

    def valid_secrets(self, now: dt.datetime) -> list[str]:
        """Newest first: the current secret and every previous one still inside its overlap."""
        return [s.secret for s in self.secrets if s.expires_at is None or s.expires_at > now]

    def valid_signing_keys(self, now: dt.datetime) -> list[SigningSecret]:
        """The valid secrets that have an ed25519 key, newest first."""
        return [s for s in self.secrets if s.signing_key and (s.expires_at is None or s.expires_at > now)]

    def signers(self, now: dt.datetime) -> list[Callable[[bytes], bytes]]:
        """``v1a`` signers, only for the schemes that carry ``webhook-signature``."""
        if self.signature_scheme is SignatureScheme.STRIPE:
            return []
        return [signer(s.signing_key) for s in self.valid_signing_keys(now)]

    def previous_secret_expires_at(self, now: dt.datetime) -> dt.datetime | None:
        live = [s.expires_at for s in self.secrets if s.expires_at is not None and s.expires_at > now]
        return max(live) if live else None


@dataclass(slots=True)
class EventRecord:
    id: str
    account_id: str
    environment: str
    type: str
    state: str
    created_at: dt.datetime
    envelope: bytes
    seq: int = 0

    @property
    def data(self) -> dict[str, Any]:
        value = json.loads(self.envelope).get("data", {})
        return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class DeliveryRecord:
    id: str
    event_id: str
    endpoint_id: str
    account_id: str
    environment: str
    event_type: str
    status: DeliveryStatus
    attempt_count: int
    # Attempts within the current run of the retry schedule (RecoverEndpoint starts a new run).
    schedule_count: int
    next_attempt_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    # The event's ordering key when its endpoint is ordered (None: never held back), and its event's seq
    # (``_ordering``).
    ordering_key: str | None = None
    event_seq: int | None = None
    # Its endpoint is a polling endpoint: it waits in the poll queue (``_polls``), never in the worker's.
    # Not stored: known at fan-out only.
    polled: bool = False


@dataclass(slots=True)
class AttemptRecord:
    id: str
    delivery_id: str
    endpoint_id: str
    event_id: str
    account_id: str
    environment: str
    attempt_number: int
    outcome: str
    response_status: int
    response_body: str
    request_headers: dict[str, str]
    latency_ms: float
    error: str
    attempted_at: dt.datetime
    manual: bool = False
    # The receiver's response headers, capped (``_delivery.kept_headers``).
    response_headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Claim:
    """A due delivery leased to one worker, with what sending it needs."""

    delivery: DeliveryRecord
    envelope: bytes
    endpoint: EndpointRecord | None  # None: the endpoint was deleted


@dataclass(slots=True)
class DeliveryResult:
    """What the worker decided for one claimed delivery, written in a batch (``attempt.outcome`` is the
    attempt's ``AttemptOutcome``)."""

    delivery_id: str
    endpoint_id: str
    attempt: AttemptRecord | None  # None: nothing was sent (endpoint disabled or deleted)
    status: DeliveryStatus
    next_attempt_at: dt.datetime | None
    counts_attempt: bool
    disable_endpoint: bool = False
    disabled_reason: str = ""
    # Health to announce (``_health``): the endpoint.failing level this failure reached, a recovery,
    # a delivery that gave up (delivery.exhausted).
    failing_level: int = 0
    recovered: bool = False
    exhausted: bool = False


@dataclass(slots=True)
class Alert:
    id: str
    account_id: str
    environment: str
    endpoint_id: str
    url: str
    reason: str
    created_at: dt.datetime


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    account_id: str
    environment: str
    endpoint_id: str = ""
    event_id: str = ""
    delivery_id: str = ""
    status: str = ""
    event_type: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class EventFilter:
    """An account's events in one environment, of some kinds (empty: all), created in [since, until)."""

    account_id: str
    environment: str
    types: tuple[str, ...]
    since: dt.datetime
    until: dt.datetime | None = None
    undelivered_to: str = ""  # an endpoint id: only events whose delivery to it is held or failed


@dataclass(frozen=True, slots=True)
class Stats:
    queue_depth: int
    oldest_overdue_seconds: float
    # Claimed deliveries whose lease ran out and that no process has claimed again (their holder died).
    lease_expired: int = 0


# How long an idempotency key of a registration or rotation counts (as the edge's, decisions.md).
IDEMPOTENCY_WINDOW = dt.timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """A caller's idempotency key on an endpoint registration or rotation, with the request it came with."""

    key: str
    request_hash: str
    created_at: dt.datetime


class Repository(Protocol):
    async def create_endpoint(
        self, endpoint: EndpointRecord, idem: IdempotencyRecord | None = None, limit: int | None = None
    ) -> bool:
        """Insert the endpoint (and the key that created it). False: a concurrent call took the key first;
        nothing was written. ``limit``: Conflict when the account already has that many endpoints in the
        environment (``webhookd._endpoint_cap``); None: no limit."""
        ...

    async def find_idempotent(
        self, account_id: str, environment: str, key: str, since: dt.datetime
    ) -> tuple[str, str] | None:
        """(request hash, endpoint id) recorded for ``key`` at or after ``since``."""
        ...

    async def purge_idempotency(self, before: dt.datetime) -> int: ...

    async def get_endpoint(
        self, account_id: str, environment: str, endpoint_id: str
    ) -> EndpointRecord | None: ...

    async def list_endpoints(
        self, account_id: str, environment: str, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[EndpointRecord]: ...

    async def save_endpoint(self, endpoint: EndpointRecord, idem: IdempotencyRecord | None = None) -> bool:
        """Update the endpoint (and record the key of the change). False as for ``create_endpoint``."""
        ...

    async def delete_endpoint(self, endpoint: EndpointRecord, now: dt.datetime) -> None: ...

    async def publish(
        self, event: EventRecord, idempotency_key: str, now: dt.datetime, exclude_endpoint: str = ""
    ) -> tuple[EventRecord, int]:
        """Store ``event`` and fan it out to the scope's endpoints subscribed to its kind (all but
        ``exclude_endpoint``); (the stored event, its deliveries). A key seen before: the first event."""
        ...

    async def create_test_delivery(self, event: EventRecord, delivery: DeliveryRecord) -> None: ...

    async def get_claim(self, delivery_id: str) -> Claim | None: ...

    async def get_attempt(
        self, account_id: str, environment: str, attempt_id: str
    ) -> AttemptRecord | None: ...

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None: ...

    async def record_manual_attempt(
        self, attempt: AttemptRecord, succeeded: bool, now: dt.datetime
    ) -> None: ...

    async def list_deliveries(
        self, flt: DeliveryFilter, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[DeliveryRecord]: ...

    async def list_attempts(
        self, flt: DeliveryFilter, outcome: str, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[AttemptRecord]: ...

    async def attempt_stats(
        self, account_id: str, environment: str, since: dt.datetime, recent_since: dt.datetime | None = None
    ) -> tuple[int, int, int, int]:
        """(attempts, succeeded) of the account and environment since ``since``, then the same since
        ``recent_since`` (zeros without one)."""
        ...

    async def count_events_by_day(
        self, account_id: str, environment: str, kind: str, since: dt.datetime, until: dt.datetime | None
    ) -> list[tuple[dt.date, int]]:
        """Events of ``kind`` of the account and environment created in [since, until) (no end: None), per
        UTC day, oldest first; days without any left out."""
        ...

    async def recover(self, endpoint: EndpointRecord, since: dt.datetime | None, now: dt.datetime) -> int: ...

    async def recoverable(self, endpoint: EndpointRecord, since: dt.datetime | None) -> int:
        """How many deliveries ``recover`` would queue again, changing nothing."""
        ...

    async def advance_sandbox(self, account_id: str, by: dt.timedelta, now: dt.datetime) -> int:
        """The sandbox clock (``Queue.advance_sandbox``): how many of the account's sandbox deliveries are
        due now."""
        ...

    async def event_seq(self, account_id: str, environment: str, event_id: str) -> int | None: ...

    async def max_event_seq(self) -> int: ...

    async def events_since(self, after_seq: int, limit: int, also: Sequence[int] = ()) -> list[EventRecord]:
        """Events of every account after ``after_seq`` or of a seq in ``also`` (gaps the tailer waits
        for), in seq order (the stream tailer's read)."""
        ...

    async def events_after(
        self,
        account_id: str,
        environment: str,
        after_seq: int,
        types: Sequence[str],
        limit: int,
        also: Sequence[int] = (),
    ) -> list[EventRecord]:
        """A scope's events of ``types`` after ``after_seq`` or of a seq in ``also``, in seq order (a
        stream's catch-up read)."""
        ...

    async def list_events(
        self, flt: EventFilter, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[EventRecord]: ...

    async def get_event(
        self, account_id: str, environment: str, event_id: str, since: dt.datetime
    ) -> EventRecord | None: ...

    async def purge_attempts(self, before: dt.datetime) -> int: ...

    async def purge_sandbox_attempts(self, before: dt.datetime) -> int: ...

    async def purge_delivery_counts(self, now: dt.datetime) -> int: ...

    async def query_delivery_counts(
        self,
        account_id: str,
        environment: str,
        start: dt.datetime,
        end: dt.datetime,
        grain: int,
        group_period: int,
        endpoint_id: str = "",
    ) -> list[Any]: ...

    async def count_events(self, account_id: str, environment: str, since: dt.datetime) -> int: ...

    async def pending_alerts(self, limit: int, after: tuple[dt.datetime, str] | None = None) -> list[Alert]:
        """Unsent alerts, oldest first (created, id), after the ``after`` cursor."""
        ...

    async def finish_alert(self, alert_id: str, now: dt.datetime) -> None:
        """Marks an alert sent (only once it was)."""
        ...

    async def add_alert(self, alert: Alert) -> bool:
        """Stores a pending alert unless one of its id is stored (then False: no second e-mail)."""
        ...

    async def stats(self, now: dt.datetime) -> Stats: ...

    async def close(self) -> None: ...

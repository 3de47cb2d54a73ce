"""The storage port authsvc depends on; ``_sql.SqlRepository`` is its SQLAlchemy adapter."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from authsvc._certify_rules import RunRequest
from authsvc._leak_rules import Leak, LeakOutcome
from authsvc._ledger import HoldResult, Ledger, LedgerEntry
from authsvc._ledger_rules import HoldState
from authsvc._model import Account, AccountStatus, Actor, ApiKey, AuditEvent, AuditFilter, OutboxEvent, Usage
from authsvc._requestlog import RequestFilter, RequestRecord
from authsvc._usage_rules import Retention, UsageCell, UsageQuery
from svckit.certification import Fault
from svckit.vocabulary import Environment

if TYPE_CHECKING:
    from authsvc._sql_certify import CertRun

# Outbox rows claimed in one pass of the relay.
OUTBOX_BATCH = 50


class Repository(Protocol):
    async def migrate(self) -> str: ...

    async def create_account(self, account: Account, actor: Actor) -> Account: ...
    async def get_account(self, account_id: str) -> Account: ...
    async def account_users(
        self, account_id: str, roles: Sequence[str]
    ) -> tuple[Account, list[tuple[str, str]]]: ...
    async def set_account_status(
        self, account_id: str, status: AccountStatus, actor: Actor, now: dt.datetime
    ) -> tuple[Account, bool]: ...
    async def update_account(
        self, account_id: str, changes: dict[str, Any], actor: Actor, now: dt.datetime
    ) -> Account: ...
    async def set_certification(
        self,
        account_id: str,
        actor: Actor,
        now: dt.datetime,
        *,
        required: bool | None = None,
        certify_reason: str = "",
    ) -> tuple[Account, bool]: ...

    async def create_key(self, key: ApiKey, actor: Actor) -> ApiKey: ...

    # Certification runs (authsvc._sql_certify).
    async def cert_start(self, run: CertRun, actor: Actor) -> CertRun: ...
    async def cert_get(self, account_id: str, run_id: str) -> CertRun: ...
    async def cert_claim(
        self, account_id: str, run_id: str, now: dt.datetime
    ) -> tuple[int, Fault | None]: ...
    async def cert_record(
        self, account_id: str, run_id: str, records: Sequence[RunRequest], keys: Sequence[str]
    ) -> int: ...
    async def cert_record_probes(
        self, account_id: str, run_id: str, probes: Sequence[dict[str, Any]]
    ) -> int: ...
    async def cert_requests(self, run_id: str) -> list[RunRequest]: ...
    async def cert_expired(self, now: dt.datetime, limit: int) -> list[CertRun]: ...
    async def cert_finish(
        self, run: CertRun, passed: bool, report: str, actor: Actor, now: dt.datetime
    ) -> CertRun: ...
    async def cert_signing_keys(self) -> list[tuple[str, str, str]]: ...
    async def cert_add_signing_key(self, key_id: str, public: str, sealed: str, now: dt.datetime) -> None: ...
    async def get_key(self, key_id: str) -> ApiKey: ...
    async def grant_by_hash(self, secret_hash: str) -> tuple[ApiKey, Account] | None: ...
    async def key_hashes(self, limit: int) -> list[str]: ...
    async def list_keys(
        self,
        account_id: str,
        environment: Environment | None,
        include_revoked: bool,
        limit: int,
        after: tuple[float, str] | None,
    ) -> list[ApiKey]: ...
    async def update_key(
        self, key_id: str, changes: dict[str, Any], actor: Actor, now: dt.datetime
    ) -> ApiKey: ...
    async def rotate_key(
        self,
        key_id: str,
        new_key_factory: Callable[[ApiKey], ApiKey],
        expires_at: dt.datetime,
        actor: Actor,
        now: dt.datetime,
    ) -> tuple[ApiKey, ApiKey]: ...
    async def revoke_key(
        self, key_id: str, reason: str, actor: Actor, now: dt.datetime, event_id: str
    ) -> tuple[ApiKey, bool]: ...
    async def flush_last_used(self, used: Mapping[str, dt.datetime]) -> None: ...
    async def revoke_leaked(
        self,
        leaks: Sequence[Leak],
        reporter: str,
        actor: Actor,
        now: dt.datetime,
        new_event_id: Callable[[], str],
    ) -> list[LeakOutcome]: ...

    async def list_audit(
        self,
        account_id: str,
        key_id: str,
        limit: int,
        after_seq: int,
        filters: AuditFilter | None = None,
        newest_first: bool = False,
    ) -> list[tuple[int, AuditEvent]]:
        """(seq, event) in ``seq`` order, after ``after_seq``; newest first: descending, before
        ``after_seq`` (0: from the newest)."""
        ...

    async def resolve_traveller(
        self, account_id: str, environment: Environment, ref: str, now: dt.datetime
    ) -> tuple[str, bool]: ...
    async def delete_traveller(self, account_id: str, environment: Environment, ref: str) -> str: ...

    async def consume_search(
        self, account_id: str, environment: Environment, day: str, count: int, now: dt.datetime
    ) -> Usage: ...
    async def get_usage(self, account_id: str, day: str) -> Usage: ...

    async def claim_outbox(
        self, now: dt.datetime, lease: float, limit: int = OUTBOX_BATCH
    ) -> list[OutboxEvent]: ...
    async def mark_sent(self, event_id: str, now: dt.datetime) -> None: ...
    async def mark_failed(self, event_id: str, error: str, retry_at: dt.datetime) -> None: ...
    async def purge_outbox(self, sent_before: dt.datetime) -> int: ...
    async def outbox_backlog(self) -> tuple[int, float | None]: ...

    async def record_requests(
        self, records: Sequence[RequestRecord], bound: int = ...
    ) -> tuple[int, int]: ...
    async def list_requests(
        self,
        account_id: str,
        environment: Environment | None,
        filters: RequestFilter,
        limit: int,
        after: tuple[float, str] | None,
    ) -> list[RequestRecord]: ...
    async def purge_requests(self, before: dt.datetime) -> int: ...

    async def record_usage_counts(
        self, batch_id: str, cells: Sequence[UsageCell], now: dt.datetime
    ) -> tuple[int, bool]: ...
    async def query_usage_counts(self, query: UsageQuery) -> list[UsageCell]: ...
    async def prune_usage_counts(self, now: dt.datetime, retention: Retention) -> int: ...

    async def place_hold(
        self, account_id: str, env: Environment, ref: str, amount: int, currency: str, now: dt.datetime
    ) -> HoldResult: ...
    async def move_hold(
        self, account_id: str, env: Environment, ref: str, target: HoldState, now: dt.datetime
    ) -> HoldResult: ...
    async def get_ledger(self, account_id: str, env: Environment) -> Ledger: ...
    async def list_ledger_entries(
        self, account_id: str, env: Environment, limit: int, before_seq: int
    ) -> list[tuple[int, LedgerEntry]]: ...
    async def set_credit_limit(
        self, account_id: str, env: Environment, limit: int, currency: str, actor: Actor, now: dt.datetime
    ) -> Ledger: ...
    async def set_warning_level(
        self, account_id: str, env: Environment, level: int | None, actor: Actor, now: dt.datetime
    ) -> Ledger: ...
    async def add_credit(
        self,
        account_id: str,
        env: Environment,
        amount: int,
        reference: str,
        note: str,
        actor: Actor,
        now: dt.datetime,
    ) -> tuple[Ledger, LedgerEntry, bool]: ...

"""authsvc's tables (one MetaData, which the Alembic revisions in authsvc/migrations must match) and the
conversions between their rows and the model. Times are stored as unix seconds."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from authsvc import _requestlog as rl
from authsvc import _validate as v
from authsvc._model import Account, AccountMode, AccountStatus, Actor, ApiKey, AuditEvent
from svckit.vocabulary import Environment

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")

# The longest outbox publish error kept (auth_outbox.last_error).
MAX_ERROR = 500

metadata = sa.MetaData()

accounts = sa.Table(
    "auth_accounts",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(v.MAX_NAME), nullable=False),
    sa.Column("mode", sa.String(8), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("admin_emails", sa.Text, nullable=False),
    sa.Column("daily_search_allowance", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # Revision 0010: searches per confirmed booking the contract allows; 0: none.
    sa.Column("look_to_book_target", sa.BigInteger, nullable=False, server_default="0"),
    # Certification (revision 0011): live keys only once certified_at is set, when required.
    sa.Column("require_certification", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("certified_at", sa.Float, nullable=True),
    sa.Column("cert_run_id", sa.String(40), nullable=True),
    sa.Column("cert_run_key_id", sa.String(40), nullable=True),
    sa.Column("cert_run_ends_at", sa.Float, nullable=True),
    sa.Column("cert_fault_every", sa.Integer, nullable=True),
)

# Portal users (Alembic revision 0002; stored and read by _identity_sql, and by the account storage for
# an account's alert recipients).
users = sa.Table(
    "auth_portal_users",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("email", sa.String(v.MAX_EMAIL), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("password_hash", sa.String(200), nullable=False),
    sa.Column("totp_seed", sa.String(200)),
    sa.Column("totp_pending_seed", sa.String(200)),
    sa.Column("totp_last_step", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_sign_in_at", sa.Float),
    sa.Index("auth_portal_users_account", "account_id", "created_at", "id"),
)

keys = sa.Table(
    "auth_keys",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), sa.ForeignKey("auth_accounts.id"), nullable=False),
    sa.Column("environment", sa.String(8), nullable=False),
    sa.Column("name", sa.String(v.MAX_NAME), nullable=False),
    sa.Column("scopes", sa.Text, nullable=False),
    sa.Column("allowed_sources", sa.Text, nullable=False),
    sa.Column("hint", sa.String(40), nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float),
    sa.Column("revoked_at", sa.Float),
    sa.Column("revoke_reason", sa.String(v.MAX_REASON)),
    sa.Column("last_used_at", sa.Float),
    sa.Column("rotated_to_key_id", sa.String(40), nullable=False, server_default=""),
    sa.Column("rate_limit", sa.Integer, nullable=False, server_default="0"),
    sa.Column("rotated_from_key_id", sa.String(40), nullable=False, server_default=""),
    sa.Column("rotated_at", sa.Float),
    sa.Index("auth_keys_account", "account_id", "created_at", "id"),
)

audit = sa.Table(
    "auth_audit_events",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(40), nullable=False, unique=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("key_id", sa.String(40), nullable=False),
    sa.Column("action", sa.String(v.MAX_ACTION), nullable=False),
    sa.Column("actor_user", sa.String(v.MAX_ACTOR), nullable=False),
    sa.Column("actor_source", sa.String(v.MAX_SOURCE), nullable=False),
    # Revision 0002 (portal users); "" for operators and services.
    sa.Column("actor_user_id", sa.String(40), nullable=False, server_default=""),
    sa.Column("actor_service", sa.String(100), nullable=False, server_default=""),
    sa.Column("occurred_at", sa.Float, nullable=False),
    sa.Column("before", sa.Text, nullable=False),
    sa.Column("after", sa.Text, nullable=False),
    sa.Index("auth_audit_account", "account_id", "seq"),
)

travellers = sa.Table(
    "auth_travellers",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("environment", sa.String(8), nullable=False),
    sa.Column("partner_ref", sa.String(v.MAX_PARTNER_REF), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("account_id", "environment", "partner_ref", name="auth_travellers_ref"),
)

usage = sa.Table(
    "auth_search_usage",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False),
    sa.Column("threshold_sent", sa.Boolean, nullable=False),
)


def _account_records() -> tuple[sa.Column[Any], ...]:
    """The first columns of a table of an account's records in the order written (the outbox, the ledger
    entries): the sequence, the record's id, its account and environment."""
    return (
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(40), nullable=False, unique=True),
        sa.Column("account_id", sa.String(40), nullable=False),
        sa.Column("environment", sa.String(8), nullable=False),
    )


outbox = sa.Table(
    "auth_outbox",
    metadata,
    *_account_records(),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("state", sa.String(64), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("sent_at", sa.Float),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", sa.Float, nullable=False),
    sa.Column("last_error", sa.String(MAX_ERROR), nullable=False, server_default=""),
    sa.Index("auth_outbox_pending", "sent_at", "next_attempt_at"),
)

# The request log (revision 0007; authsvc._requestlog): one row per partner request the edge answered,
# metadata only, kept RETENTION; listed newest first per account and environment.
requests = sa.Table(
    "auth_requests",
    metadata,
    sa.Column("request_id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("environment", sa.String(8), nullable=False),
    sa.Column("key_id", sa.String(40), nullable=False),
    sa.Column("key_hint", sa.String(40), nullable=False),
    sa.Column("method", sa.String(rl.MAX_METHOD), nullable=False),
    sa.Column("path", sa.String(rl.MAX_PATH), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("error_type", sa.String(rl.MAX_ERROR_TYPE), nullable=False),
    sa.Column("latency_ms", sa.Integer, nullable=False),
    sa.Column("occurred_at", sa.Float, nullable=False),
    sa.Index("auth_requests_account", "account_id", "environment", "occurred_at"),
    # The purge of records older than RETENTION.
    sa.Index("auth_requests_time", "occurred_at"),
)

# Records offered per account and UTC day (kept and dropped): the daily bound (authsvc._requestlog.admit).
request_counts = sa.Table(
    "auth_request_counts",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("offered", sa.BigInteger, nullable=False),
)


# Mode A credit (revision 0008; authsvc._ledger_rules): one balance row per account and environment (the
# row every hold locks), the holds by booking reference, and the entries partners read, newest first.
# Every entry is written under the ledger row's lock, so a credit's reference (its idempotency key) is
# looked up and written with no other change of the ledger in between.
ledgers = sa.Table(
    "auth_ledgers",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("environment", sa.String(8), primary_key=True),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("credit_limit", sa.BigInteger, nullable=False),
    sa.Column("held", sa.BigInteger, nullable=False),
    sa.Column("captured", sa.BigInteger, nullable=False),
    sa.Column("credits", sa.BigInteger, nullable=False),
    sa.Column("warning_level", sa.BigInteger),
    sa.Column("below_warning", sa.Boolean, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

credit_holds = sa.Table(
    "auth_credit_holds",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("environment", sa.String(8), primary_key=True),
    sa.Column("booking_ref", sa.String(v.MAX_BOOKING_REF), primary_key=True),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

ledger_entries = sa.Table(
    "auth_ledger_entries",
    metadata,
    *_account_records(),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("reference", sa.String(v.MAX_BOOKING_REF), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("available_after", sa.BigInteger, nullable=False),
    sa.Column("note", sa.String(v.MAX_REASON), nullable=False),
    sa.Column("actor_user", sa.String(v.MAX_ACTOR), nullable=False),
    sa.Column("actor_service", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("auth_ledger_entries_account", "account_id", "environment", "seq"),
    # A credit's reference looked up (AddCredit's idempotency, checked under the ledger's lock).
    sa.Index("auth_ledger_entries_ref", "account_id", "environment", "reference"),
)

# Revision 0010: when an account's traffic alert of a kind (``look_to_book``, ``anomaly:error_rate``,
# ``anomaly:latency``) was last sent: each rule says how often it may be (svckit.looktobook,
# authsvc._anomaly_rules).
traffic_alerts = sa.Table(
    "auth_traffic_alerts",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("kind", sa.String(40), primary_key=True),
    sa.Column("sent_at", sa.Float, nullable=False),
)


def seconds_of(value: dt.datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def time_of(value: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(value, dt.UTC) if value is not None else None


def required_time_of(value: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, dt.UTC)


def from_row(cls: type[T], row: Mapping[Any, Any], **convert: Callable[[Any], Any]) -> T:
    """The dataclass ``cls`` from the row's columns of its fields' names, each through its ``convert``
    where one is given (``required_time_of``, an enum, ``int``), else as stored."""
    return cls(**{f.name: convert.get(f.name, _as_stored)(row[f.name]) for f in dataclasses.fields(cls)})


def _as_stored(value: Any) -> Any:
    return value


def account_of(row: Mapping[Any, Any]) -> Account:
    return Account(
        id=row["id"],
        name=row["name"],
        mode=AccountMode(row["mode"]),
        status=AccountStatus(row["status"]),
        admin_emails=tuple(json.loads(row["admin_emails"])),
        daily_search_allowance=int(row["daily_search_allowance"]),
        created_at=required_time_of(row["created_at"]),
        updated_at=required_time_of(row["updated_at"]),
        look_to_book_target=int(row["look_to_book_target"]),
        require_certification=bool(row.get("require_certification", False)),
        certified_at=time_of(row.get("certified_at")),
        open_run_id=row.get("cert_run_id") or "",
        open_run_key_id=row.get("cert_run_key_id") or "",
        open_run_ends_at=time_of(row.get("cert_run_ends_at")),
        fault_every=int(row.get("cert_fault_every") or 0),
    )


def key_of(row: Mapping[Any, Any]) -> ApiKey:
    return ApiKey(
        id=row["id"],
        account_id=row["account_id"],
        environment=Environment(row["environment"]),
        name=row["name"],
        scopes=tuple(json.loads(row["scopes"])),
        allowed_sources=tuple(json.loads(row["allowed_sources"])),
        hint=row["hint"],
        secret_hash=row["secret_hash"],
        created_at=required_time_of(row["created_at"]),
        expires_at=time_of(row["expires_at"]),
        revoked_at=time_of(row["revoked_at"]),
        last_used_at=time_of(row["last_used_at"]),
        rotated_at=time_of(row["rotated_at"]),
        rotated_to_key_id=row["rotated_to_key_id"] or "",
        rotated_from_key_id=row["rotated_from_key_id"] or "",
        rate_limit=int(row["rate_limit"]),
    )


def key_row(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "account_id": key.account_id,
        "environment": key.environment,
        "name": key.name,
        "scopes": json.dumps(list(key.scopes)),
        "allowed_sources": json.dumps(list(key.allowed_sources)),
        "hint": key.hint,
        "secret_hash": key.secret_hash,
        "created_at": seconds_of(key.created_at),
        "expires_at": seconds_of(key.expires_at),
        "revoked_at": seconds_of(key.revoked_at),
        "last_used_at": seconds_of(key.last_used_at),
        "rotated_at": seconds_of(key.rotated_at),
        "rotated_to_key_id": key.rotated_to_key_id,
        "rotated_from_key_id": key.rotated_from_key_id,
        "rate_limit": key.rate_limit,
    }


def audit_event_of(row: Mapping[Any, Any]) -> AuditEvent:
    return AuditEvent(
        id=row["id"],
        account_id=row["account_id"],
        key_id=row["key_id"],
        action=row["action"],
        actor=Actor(
            row["actor_user"], row["actor_source"], row["actor_user_id"] or "", row["actor_service"] or ""
        ),
        occurred_at=required_time_of(row["occurred_at"]),
        before=json.loads(row["before"]),
        after=json.loads(row["after"]),
    )


def request_of(row: Mapping[Any, Any]) -> rl.RequestRecord:
    return rl.RequestRecord(
        request_id=row["request_id"],
        account_id=row["account_id"],
        environment=Environment(row["environment"]),
        key_id=row["key_id"],
        key_hint=row["key_hint"],
        method=row["method"],
        path=row["path"],
        status=int(row["status"]),
        error_type=row["error_type"],
        latency_ms=int(row["latency_ms"]),
        occurred_at=required_time_of(row["occurred_at"]),
    )


def request_row(record: rl.RequestRecord) -> dict[str, Any]:
    return {
        "request_id": record.request_id,
        "account_id": record.account_id,
        "environment": record.environment,
        "key_id": record.key_id,
        "key_hint": record.key_hint,
        "method": record.method,
        "path": record.path,
        "status": record.status,
        "error_type": record.error_type,
        "latency_ms": record.latency_ms,
        "occurred_at": record.occurred_at.timestamp(),
    }

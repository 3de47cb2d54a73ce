"""SQLAlchemy 2 async Core adapter of the repository, for SQLite and PostgreSQL.

Every mutating method is one transaction: the change, its audit record and (for revocation and the
search threshold) the outbox row commit together or not at all. Times are stored as unix seconds.
Schema changes are Alembic revisions in authsvc/migrations; the tables are in ``_sql_tables``.

The repository is assembled from one part per thing it stores, each on ``SqlBase`` (engine, NOTIFY,
audit and outbox writes): accounts, keys, audit, travellers and search usage, outbox, request log,
mode A credit ledgers, usage counts.
"""

from __future__ import annotations

from authsvc._sql_accounts import AccountStorage
from authsvc._sql_audit import AuditStorage
from authsvc._sql_certify import CertificationStorage
from authsvc._sql_keys import KeyStorage
from authsvc._sql_leaks import LeakStorage
from authsvc._sql_ledger import LedgerStorage
from authsvc._sql_outbox import OutboxStorage
from authsvc._sql_requests import RequestStorage
from authsvc._sql_tables import metadata
from authsvc._sql_traffic_alerts import TrafficAlertStorage
from authsvc._sql_usage import UsageStorage
from authsvc._sql_usage_counts import UsageCountStorage

__all__ = ["SqlRepository", "metadata"]


class SqlRepository(
    AccountStorage,
    KeyStorage,
    LeakStorage,
    AuditStorage,
    UsageStorage,
    OutboxStorage,
    RequestStorage,
    LedgerStorage,
    UsageCountStorage,
    TrafficAlertStorage,
    CertificationStorage,
):
    """The repository on an AsyncEngine. With ``notify_channel`` (PostgreSQL) changes also NOTIFY."""

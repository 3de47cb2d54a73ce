"""Records authsvc works with, independent of storage and wire format. Times are aware UTC datetimes."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Literal

from svckit.allowlist import Network, compile_allowlist
from svckit.peers import caller_var
from svckit.vocabulary import AccountMode, AccountStatus, Environment, KeyStatus

__all__ = [
    "DEFAULT_DAILY_SEARCH_ALLOWANCE",
    "Account",
    "AccountMode",
    "AccountStatus",
    "Actor",
    "ApiKey",
    "AuditEvent",
    "AuditFilter",
    "Environment",
    "KeyChange",
    "KeyGrant",
    "KeyStatus",
    "OutboxEvent",
    "Usage",
]

DEFAULT_DAILY_SEARCH_ALLOWANCE = 10_000


@dataclasses.dataclass(frozen=True, slots=True)
class Actor:
    user: str
    source_address: str = ""
    # The portal user's id when a portal user acted.
    user_id: str = ""
    # The calling service, from its mTLS certificate: an actor made while serving a call names it.
    service: str = dataclasses.field(default_factory=caller_var.get)


@dataclasses.dataclass(frozen=True, slots=True)
class Account:
    id: str
    name: str
    mode: AccountMode
    status: AccountStatus
    admin_emails: tuple[str, ...]
    daily_search_allowance: int
    created_at: dt.datetime
    updated_at: dt.datetime
    # Live searches per confirmed booking the contract allows over 7 days; 0: none (svckit.looktobook).
    look_to_book_target: int = 0
    # Live keys only once certified (certified_at: a passing certification report, or an override).
    require_certification: bool = False
    certified_at: dt.datetime | None = None
    # The certification run open now ("" none): its sandbox key, end and fault schedule.
    open_run_id: str = ""
    open_run_key_id: str = ""
    open_run_ends_at: dt.datetime | None = None
    fault_every: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    account_id: str
    environment: Environment
    name: str
    scopes: tuple[str, ...]
    allowed_sources: tuple[str, ...]
    hint: str
    secret_hash: str
    created_at: dt.datetime
    expires_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = None
    last_used_at: dt.datetime | None = None
    rotated_to_key_id: str = ""
    rotated_from_key_id: str = ""
    # Requests a second across all edges; 0: the environment's default, which the edge holds
    # (edge.config.EdgeConfig.rate_limit_live / rate_limit_sandbox).
    rate_limit: int = 0
    # When it was rotated out (its successor's creation); None unless rotated.
    rotated_at: dt.datetime | None = None

    def status(self, now: dt.datetime) -> KeyStatus:
        if self.revoked_at is not None:
            return KeyStatus.REVOKED
        if self.expires_at is not None:
            return KeyStatus.EXPIRED if self.expires_at <= now else KeyStatus.EXPIRING
        return KeyStatus.ACTIVE

    def public_fields(self) -> dict[str, Any]:
        """Fields shown in audit before/after: never the secret or its hash."""
        return {
            "name": self.name,
            "scopes": list(self.scopes),
            "allowed_sources": list(self.allowed_sources),
            "rate_limit": self.rate_limit,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class KeyGrant:
    """What the decision needs about a key: the key, its compiled allow list and its account."""

    key: ApiKey
    account: Account
    networks: tuple[Network, ...]

    @classmethod
    def of(cls, key: ApiKey, account: Account) -> KeyGrant:
        return cls(key, account, compile_allowlist(key.allowed_sources))


@dataclasses.dataclass(frozen=True, slots=True)
class AuditEvent:
    id: str
    account_id: str
    key_id: str
    action: str
    actor: Actor
    occurred_at: dt.datetime
    before: dict[str, Any]
    after: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class AuditFilter:
    actor_user_id: str = ""
    action: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    date: str
    searches_used: int
    daily_search_allowance: int

    @property
    def remaining(self) -> int:
        return max(0, self.daily_search_allowance - self.searches_used)


@dataclasses.dataclass(frozen=True, slots=True)
class OutboxEvent:
    id: str
    account_id: str
    environment: Environment
    type: str
    state: str
    data: dict[str, Any]
    created_at: dt.datetime
    attempts: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class KeyChange:
    kind: Literal["sync", "revoked", "rotated", "updated", "account_updated"]
    key_id: str
    account_id: str
    changed_at: dt.datetime

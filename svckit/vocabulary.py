"""The words every process shares, as ``StrEnum``: what is stored, shown in JSON and logged.

The proto enums mirror them by name (``ENVIRONMENT_LIVE``, ``KEY_STATUS_REVOKED``, ...);
``svckit.prototables`` derives each two-way table from the names, so no number is written by hand.
"""

from __future__ import annotations

from enum import StrEnum

from svckit.webhook_status import DeliveryStatus, EndpointStatus


class Environment(StrEnum):
    LIVE = "live"
    SANDBOX = "sandbox"


class AccountStatus(StrEnum):
    ACTIVE = "active"
    READ_ONLY = "read_only"


class AccountMode(StrEnum):
    """The commercial mode, spelt as the API shows it (``/v1/account``'s ``mode``) and the event catalog
    names it (``EventKind.mode``). authsvc stores it lower-case ("a"/"b"), as every earlier release did and
    still reads during a rolling upgrade; reading either spelling gives the same member (``_missing_``)."""

    A = "A"  # the partner spends its own credit
    B = "B"  # the traveller pays

    @classmethod
    def _missing_(cls, value: object) -> AccountMode | None:
        if isinstance(value, str):
            return next((m for m in cls if m.value == value.upper()), None)
        return None


class KeyStatus(StrEnum):
    ACTIVE = "active"
    EXPIRING = "expiring"  # rotated out, still valid until its expiry
    EXPIRED = "expired"
    REVOKED = "revoked"


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    NETWORK_ERROR = "network_error"

    @property
    def ok(self) -> bool:
        return self is AttemptOutcome.SUCCEEDED


class UserRole(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    DEVELOPER = "developer"
    VIEWER = "viewer"


__all__ = [
    "AccountMode",
    "AccountStatus",
    "AttemptOutcome",
    "DeliveryStatus",
    "EndpointStatus",
    "Environment",
    "KeyStatus",
    "UserRole",
]

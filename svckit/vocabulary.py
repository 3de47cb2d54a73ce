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
    A = "a"  # the partner spends its own credit
    B = "b"  # the traveller pays


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

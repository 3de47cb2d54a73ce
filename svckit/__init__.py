"""Pieces the three services share: errors, ids, clock, storage, logs, metrics, gRPC plumbing."""

from __future__ import annotations

from svckit.clock import Clock, FakeClock, SystemClock
from svckit.errors import ERROR_KINDS, ServiceError, http_status, to_grpc_status, type_from_rpc_error
from svckit.ids import new_id

__all__ = [
    "ERROR_KINDS",
    "Clock",
    "FakeClock",
    "ServiceError",
    "SystemClock",
    "http_status",
    "new_id",
    "to_grpc_status",
    "type_from_rpc_error",
]

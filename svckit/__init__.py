"""Pieces the three services share: errors, ids, clock, storage, logs, metrics, gRPC plumbing.

Each module is in one of five rooms, bottom first: vocabulary, clients, net, storage, serving
(``svckit.rooms``); it imports svckit modules of its own room and those below only. The vocabulary and
clients rooms are the client distribution product services install (``travel-clients``).

The names below load on first use, so importing one svckit module (``svckit.signing`` in the partner's
CLI) does not load gRPC and asyncio with ``svckit.errors`` and ``svckit.clock``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from svckit.clock import Clock, FakeClock, SystemClock
    from svckit.errors import ERROR_KINDS, ServiceError, http_status, to_grpc_status, type_from_rpc_error
    from svckit.ids import new_id

_HOME = {
    "Clock": "svckit.clock",
    "FakeClock": "svckit.clock",
    "SystemClock": "svckit.clock",
    "ERROR_KINDS": "svckit.errors",
    "ServiceError": "svckit.errors",
    "http_status": "svckit.errors",
    "to_grpc_status": "svckit.errors",
    "type_from_rpc_error": "svckit.errors",
    "new_id": "svckit.ids",
}
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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'svckit' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)

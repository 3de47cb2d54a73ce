"""Event payloads of the sandbox: the sample of every event kind (POST /v1/sandbox/events), the warnings
of the forced-failure triggers (edge.gate) and the data the built-in simulator's booking lifecycle
publishes (edge.simulator). Pure.

All of it comes from the event catalog (svckit.catalog), the one definition of every kind's ``state`` and
``data`` that live publishers follow too: a sandbox event is shaped exactly like a live one. The names
below are the edge's handles on it; docs/events.md shows each kind's fields and example.
"""

from __future__ import annotations

from svckit.catalog import (
    LOW_BALANCE_WARNING,
    SAMPLE_BOOKING,
    SAMPLE_DATA_BYTES,
    SAMPLE_ORDER,
    STATES,
    event_data,
    low_balance,
    quota_threshold,
    sample,
    suffix,
)

__all__ = [
    "LOW_BALANCE_WARNING",
    "SAMPLE_BOOKING",
    "SAMPLE_DATA_BYTES",
    "SAMPLE_ORDER",
    "STATES",
    "event_data",
    "low_balance",
    "quota_threshold",
    "sample",
    "suffix",
]

"""Stored times: integer microseconds since the epoch (UTC), exact and index-friendly, the same on SQLite
and PostgreSQL."""

from __future__ import annotations

import datetime as dt

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICRO = dt.timedelta(microseconds=1)


def us(when: dt.datetime) -> int:
    """Exact integer microseconds since the epoch (no float rounding)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - EPOCH) // _MICRO


def from_us(value: int | None) -> dt.datetime | None:
    return None if value is None else at_us(value)


def at_us(value: int) -> dt.datetime:
    """The time ``value`` microseconds after the epoch (``us`` inverted)."""
    return EPOCH + dt.timedelta(microseconds=int(value))

"""The polling rules (``webhookd._polling``) by table: a poll's bounds, a cursor's shape, a commit's
verdict."""

from __future__ import annotations

import datetime as dt

import pytest

from webhookd._polling import (
    DEFAULT_LEASE,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BadParameter,
    Lease,
    Verdict,
    commit_verdict,
    is_cursor,
    poll_bounds,
)

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)


@pytest.mark.parametrize(
    ("limit", "lease", "want"),
    [
        (0, 0, (DEFAULT_LIMIT, DEFAULT_LEASE)),  # both defaults
        (1, 1, (1, SEC)),  # the lowest of each
        (MAX_LIMIT, 900, (MAX_LIMIT, 900 * SEC)),  # the highest of each
        (7, 0, (7, DEFAULT_LEASE)),
        (0, 5, (DEFAULT_LIMIT, 5 * SEC)),
    ],
)
def test_poll_bounds_in_range(limit: int, lease: int, want: tuple[int, dt.timedelta]) -> None:
    got = poll_bounds(limit, lease)
    assert (got.limit, got.lease) == want


@pytest.mark.parametrize(
    ("limit", "lease", "field"),
    [
        (MAX_LIMIT + 1, 0, "limit"),
        (-1, 0, "limit"),
        (0, 901, "leaseSeconds"),
        (0, -5, "leaseSeconds"),
        (10**9, 10**9, "limit"),  # the first bad one is named
    ],
)
def test_poll_bounds_refused_naming_the_parameter(limit: int, lease: int, field: str) -> None:
    with pytest.raises(BadParameter) as caught:
        poll_bounds(limit, lease)
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ":")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("pcur_" + "a" * 32, True),
        ("pcur_" + "Az09" * 8, True),
        ("pcur_" + "a" * 31, False),  # cut short
        ("pcur_" + "a" * 33, False),  # one more
        ("pcur_" + "a" * 31 + "-", False),  # not base62
        ("pcur_" + "a" * 31 + "é", False),
        ("pcux_" + "a" * 32, False),
        ("", False),
        ("pcur_", False),
    ],
)
def test_cursor_shape(value: str, ok: bool) -> None:
    assert is_cursor(value) is ok


def lease(**changes: object) -> Lease:
    base: dict[str, object] = {
        "endpoint_id": "we_1",
        "account_id": "acct_1",
        "environment": "live",
        "expires_at": NOW + 30 * SEC,
        "committed_at": None,
    }
    return Lease(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "stored", "now", "verdict"),
    [
        ("within its lease", lease(), NOW, Verdict.COMMIT),
        ("a moment before expiry", lease(), NOW + 30 * SEC - dt.timedelta(microseconds=1), Verdict.COMMIT),
        ("at expiry: a poll may lease it again", lease(), NOW + 30 * SEC, Verdict.EXPIRED),
        ("after expiry", lease(), NOW + 3600 * SEC, Verdict.EXPIRED),
        ("committed before", lease(committed_at=NOW), NOW, Verdict.ALREADY),
        ("committed, asked again after expiry", lease(committed_at=NOW), NOW + 3600 * SEC, Verdict.ALREADY),
        ("no such cursor", None, NOW, Verdict.UNKNOWN),
        ("another endpoint's", lease(endpoint_id="we_2"), NOW, Verdict.FOREIGN),
        ("another account's: unknown, not foreign", lease(account_id="acct_2"), NOW, Verdict.UNKNOWN),
        (
            "another account's other endpoint",
            lease(account_id="acct_2", endpoint_id="we_2"),
            NOW,
            Verdict.UNKNOWN,
        ),
        ("the other environment's", lease(environment="sandbox"), NOW, Verdict.UNKNOWN),
    ],
)
def test_commit_verdict(name: str, stored: Lease | None, now: dt.datetime, verdict: Verdict) -> None:
    assert commit_verdict(stored, "we_1", "acct_1", "live", now) is verdict, name

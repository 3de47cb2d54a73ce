"""Tables for the pure rules of portal identity: roles, session expiry, TOTP window, throttling."""

from __future__ import annotations

import datetime as dt

import pyotp
import pytest

from authsvc._identity_rules import (
    MAX_ALERT_RECIPIENTS,
    MAX_FAILURES_PER_ADDRESS,
    MAX_FAILURES_PER_EMAIL,
    MAX_FAILURES_PER_EMAIL_AND_ADDRESS,
    alert_recipients,
    hashing_admitted,
    needs_touch,
    password_problem,
    session_expires_at,
    session_state,
    sign_in_throttle,
    totp_enrolment_required,
    totp_removal_problem,
    totp_step,
)
from svckit.roles import allowed, last_owner_kept, may_assign

T0 = dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC)
M = dt.timedelta(minutes=1)
S = dt.timedelta(seconds=1)


@pytest.mark.parametrize(
    ("role", "action", "ok"),
    [
        ("owner", "keys.revoke", True),
        ("owner", "users.manage", True),
        ("admin", "keys.write", True),
        ("admin", "users.manage", True),
        ("developer", "keys.read", True),
        ("developer", "keys.write", False),
        ("developer", "keys.revoke", False),
        ("developer", "webhooks.write", True),
        ("developer", "users.manage", False),
        ("viewer", "keys.read", True),
        ("viewer", "audit.read", True),
        ("viewer", "webhooks.write", False),
        ("viewer", "keys.write", False),
        ("viewer", "users.manage", False),
        ("owner", "account.security", True),
        ("admin", "account.security", False),
        ("owner", "notifications.manage", True),
        ("admin", "notifications.manage", True),
        ("developer", "notifications.manage", False),
        ("viewer", "notifications.manage", False),
        ("nobody", "keys.read", False),
    ],
)
def test_role_actions(role: str, action: str, ok: bool) -> None:
    assert allowed(role, action) is ok  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("actor", "old", "new", "ok"),
    [
        ("owner", "developer", "admin", True),
        ("owner", "admin", "owner", True),
        ("owner", "owner", None, True),
        ("admin", "developer", "viewer", True),
        ("admin", None, "admin", True),
        ("admin", None, "owner", False),
        ("admin", "owner", "admin", False),
        ("admin", "owner", None, False),
        ("developer", "viewer", "developer", False),
        ("viewer", None, "viewer", False),
    ],
)
def test_may_assign(actor: str, old: str | None, new: str | None, ok: bool) -> None:
    assert may_assign(actor, old, new) is ok


@pytest.mark.parametrize(
    ("owners", "old", "new", "ok"),
    [
        (1, "owner", None, False),
        (1, "owner", "admin", False),
        (2, "owner", None, True),
        (1, "admin", None, True),
    ],
)
def test_last_owner_kept(owners: int, old: str, new: str | None, ok: bool) -> None:
    assert last_owner_kept(owners, old, new) is ok


@pytest.mark.parametrize(
    ("created", "seen", "now", "state"),
    [
        (T0, T0, T0 + 29 * M, "live"),
        (T0, T0, T0 + 30 * M, "idle_expired"),
        (T0, T0 + 11 * 60 * M, T0 + 11 * 60 * M + 29 * M, "live"),
        (T0, T0 + 11 * 60 * M + 50 * M, T0 + 12 * 60 * M, "absolute_expired"),
        (T0, T0 + 12 * 60 * M, T0 + 12 * 60 * M + M, "absolute_expired"),
    ],
)
def test_session_state(created: dt.datetime, seen: dt.datetime, now: dt.datetime, state: str) -> None:
    assert session_state(created, seen, now) == state


@pytest.mark.parametrize(
    ("seen", "now", "touch"),
    [
        (T0, T0, False),
        (T0, T0 + 59 * S, False),
        (T0, T0 + M, True),
        (T0, T0 + 29 * M, True),
        (T0 + M, T0, False),  # a clock step back writes nothing
    ],
)
def test_needs_touch_at_most_once_a_minute(seen: dt.datetime, now: dt.datetime, touch: bool) -> None:
    assert needs_touch(seen, now) is touch


def test_session_expires_at_is_the_earlier_limit() -> None:
    assert session_expires_at(T0, T0) == T0 + 30 * M
    assert session_expires_at(T0, T0 + 11 * 60 * M + 45 * M) == T0 + 12 * 60 * M


SEED = pyotp.random_base32()


def _code(at: dt.datetime) -> str:
    return pyotp.TOTP(SEED).at(at)


@pytest.mark.parametrize(
    ("code_at", "now", "last_step", "accepted"),
    [
        (T0, T0, 0, True),
        (T0 - 30 * dt.timedelta(seconds=1), T0, 0, True),  # one step of drift behind
        (T0 + 30 * dt.timedelta(seconds=1), T0, 0, True),  # one step ahead
        (T0 - 90 * dt.timedelta(seconds=1), T0, 0, False),  # too old
        (T0, T0, int(T0.timestamp()) // 30, False),  # replay of the step already used
    ],
)
def test_totp_window(code_at: dt.datetime, now: dt.datetime, last_step: int, accepted: bool) -> None:
    step = totp_step(SEED, _code(code_at), now, last_step)
    assert (step is not None) is accepted
    if accepted:
        assert step == int(code_at.timestamp()) // 30


@pytest.mark.parametrize("code", ["", "12345", "1234567", "abcdef"])
def test_totp_malformed_codes(code: str) -> None:
    assert totp_step(SEED, code, T0, 0) is None


PAIR = MAX_FAILURES_PER_EMAIL_AND_ADDRESS


@pytest.mark.parametrize(
    ("pair_failures", "address_failures", "email_failures", "allowed_", "retry_after"),
    [
        ([], [], [], True, 0.0),
        # (e-mail, address): the rows of the old per-e-mail rule, now for one address.
        ([T0 - M] * (PAIR - 1), [], [T0 - M] * (PAIR - 1), True, 0.0),
        ([T0 - M] * PAIR, [], [T0 - M] * PAIR, False, 14 * 60.0),
        ([T0 - 16 * M] * PAIR, [], [], True, 0.0),  # left the window
        ([], [T0 - 2 * M] * MAX_FAILURES_PER_ADDRESS, [], False, 13 * 60.0),
        ([T0 - 5 * M] * PAIR, [T0 - M] * MAX_FAILURES_PER_ADDRESS, [T0 - 5 * M] * PAIR, False, 14 * 60.0),
        # No targeted lockout: the e-mail's failures from other addresses don't refuse this one ...
        ([], [], [T0 - M] * PAIR, True, 0.0),
        ([], [], [T0 - M] * (MAX_FAILURES_PER_EMAIL - 1), True, 0.0),
        ([T0 - M] * (PAIR - 1), [T0 - M] * (PAIR - 1), [T0 - M] * (MAX_FAILURES_PER_EMAIL - 1), True, 0.0),
        # ... until the much higher per-e-mail ceiling, from anywhere.
        ([], [], [T0 - 3 * M] * MAX_FAILURES_PER_EMAIL, False, 12 * 60.0),
        ([], [], [T0 - 16 * M] * MAX_FAILURES_PER_EMAIL, True, 0.0),
    ],
)
def test_sign_in_throttle(
    pair_failures: list[dt.datetime],
    address_failures: list[dt.datetime],
    email_failures: list[dt.datetime],
    allowed_: bool,
    retry_after: float,
) -> None:
    verdict = sign_in_throttle(pair_failures, address_failures, email_failures, T0)
    assert verdict.allowed is allowed_
    assert verdict.retry_after == retry_after


def test_the_per_email_ceiling_is_much_higher_than_the_per_address_lockout() -> None:
    assert MAX_FAILURES_PER_EMAIL >= 10 * MAX_FAILURES_PER_EMAIL_AND_ADDRESS


@pytest.mark.parametrize(
    ("in_flight", "workers", "max_waiting", "admitted"),
    [
        (0, 1, 8, True),
        (8, 1, 8, True),  # one running, eight waiting after this one
        (9, 1, 8, False),  # queue full: refused unhashed
        (300, 1, 8, False),
        (0, 1, 0, True),  # no queue: only the running one
        (1, 1, 0, False),
        (3, 2, 2, True),
        (4, 2, 2, False),
        (0, 0, 0, True),  # at least one worker
    ],
)
def test_hashing_load_shedding(in_flight: int, workers: int, max_waiting: int, admitted: bool) -> None:
    assert hashing_admitted(in_flight, workers, max_waiting) is admitted


@pytest.mark.parametrize(
    ("password", "problem"),
    [
        ("short", "at least"),
        ("x" * 300, "at most"),
        ("ALICE@partner.example", "e-mail"),
        ("correct horse battery", None),
    ],
)
def test_password_policy(password: str, problem: str | None) -> None:
    found = password_problem(password, "alice@partner.example")
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("account_requires", "role", "enrolled", "required"),
    [
        (False, "owner", False, False),
        (True, "owner", False, True),
        (True, "admin", False, True),
        (True, "owner", True, False),
        (True, "developer", False, False),
        (True, "viewer", False, False),
    ],
)
def test_totp_enrolment_required(account_requires: bool, role: str, enrolled: bool, required: bool) -> None:
    assert totp_enrolment_required(account_requires, role, enrolled) is required


@pytest.mark.parametrize(
    ("account_requires", "role", "enrolled", "problem"),
    [
        (False, "owner", True, None),
        (False, "viewer", True, None),
        (True, "developer", True, None),  # the requirement is for owners and admins
        (True, "viewer", True, None),
        (True, "owner", True, "requires"),
        (True, "admin", True, "requires"),
        (False, "owner", False, "not on"),
        (True, "developer", False, "not on"),
    ],
)
def test_totp_removal_problem(account_requires: bool, role: str, enrolled: bool, problem: str | None) -> None:
    found = totp_removal_problem(account_requires, role, enrolled)
    assert (found is None) if problem is None else (found is not None and problem in found)


OWNER, ADMIN, DEV, VIEWER = "owner", "admin", "developer", "viewer"


@pytest.mark.parametrize(
    ("users", "extra", "everyone", "portal"),
    [
        # A portal-only account: its owner, no extra address.
        ([("o@p.example", OWNER)], [], ["o@p.example"], ["o@p.example"]),
        # An operator-made account without portal users: the extra addresses only (as before).
        ([], ["b@p.example", "a@p.example"], ["a@p.example", "b@p.example"], []),
        ([], [], [], []),
        # Owners and admins, never developers or viewers.
        (
            [("o@p.example", OWNER), ("d@p.example", DEV), ("a@p.example", ADMIN), ("v@p.example", VIEWER)],
            ["x@p.example"],
            ["a@p.example", "o@p.example", "x@p.example"],
            ["a@p.example", "o@p.example"],
        ),
        # Once each, whatever the case: the user's spelling wins over the extra address's.
        (
            [("o@p.example", OWNER)],
            ["O@P.example", "ops@p.example", "OPS@p.example"],
            ["o@p.example", "ops@p.example"],
            ["o@p.example"],
        ),
        # Sorted case-insensitively; blanks dropped.
        (
            [("b@p.example", ADMIN)],
            ["A@p.example", " ", "c@p.example"],
            ["A@p.example", "b@p.example", "c@p.example"],
            ["b@p.example"],
        ),
        # An unknown role alerts nobody.
        ([("x@p.example", "nobody")], [], [], []),
    ],
)
def test_alert_recipients(
    users: list[tuple[str, str]], extra: list[str], everyone: list[str], portal: list[str]
) -> None:
    got = alert_recipients(users, extra)
    assert (list(got.all), list(got.portal)) == (everyone, portal)


def test_alert_recipients_are_bounded_owners_then_extra_addresses_then_admins() -> None:
    owners = [(f"owner{i:02}@p.example", OWNER) for i in range(10)]
    admins = [(f"admin{i:02}@p.example", ADMIN) for i in range(60)]
    extra = [f"extra{i:02}@p.example" for i in range(20)]
    got = alert_recipients([*admins[:5], *owners, *admins[5:]], extra)
    assert len(got.all) == MAX_ALERT_RECIPIENTS
    kept = set(got.all)
    assert {e for e, _ in owners} <= kept and set(extra) <= kept
    # The admins who signed up first fill the rest.
    assert sorted(kept - {e for e, _ in owners} - set(extra)) == [e for e, _ in admins[:20]]
    assert list(got.all) == sorted(got.all)

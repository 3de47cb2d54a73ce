"""Pure rules of portal sign-in: session expiry, the TOTP window, sign-in throttling and the password
policy. No I/O; the repository supplies the facts and the servicer acts on the answers.

Sessions (OWASP session management): a session ends after 30 minutes without a request (idle) and 12
hours after sign-in whatever happens (absolute); the last-seen time is written at most once a minute.
TOTP (RFC 6238): 30-second steps, one step of clock drift either way, and a code's step is never
accepted twice (replay). Throttling: failed sign-ins are counted in a 15-minute window per e-mail and
source address together (5), per source address (20) and per e-mail from anywhere (100, the global
ceiling on guesses at one account); once any is reached every attempt is refused with the same message
until the oldest failure leaves the window, whether or not the e-mail belongs to a user (no account
enumeration). Wrong passwords from one address so never lock the real user out from another (no
targeted lockout) unless they come from twenty addresses or more. Every attempt is counted before its
password is checked (a reservation, refunded on success), so concurrent attempts can't all slip past
the count. Password hashing admits at most a bounded number of waiting attempts (load shedding).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Literal

import pyotp

from svckit.vocabulary import UserRole

IDLE_TIMEOUT = dt.timedelta(minutes=30)
ABSOLUTE_TIMEOUT = dt.timedelta(hours=12)
TOUCH_INTERVAL = dt.timedelta(minutes=1)
TOTP_STEP = 30
TOTP_DRIFT_STEPS = 1
THROTTLE_WINDOW = dt.timedelta(minutes=15)
# Failed sign-ins in THROTTLE_WINDOW: per (e-mail, source address), per source address, per e-mail.
MAX_FAILURES_PER_EMAIL_AND_ADDRESS = 5
MAX_FAILURES_PER_ADDRESS = 20
MAX_FAILURES_PER_EMAIL = 100
MIN_PASSWORD = 12
MAX_PASSWORD = 256

SessionState = Literal["live", "idle_expired", "absolute_expired"]


def session_state(created_at: dt.datetime, last_seen_at: dt.datetime, now: dt.datetime) -> SessionState:
    if now >= created_at + ABSOLUTE_TIMEOUT:
        return "absolute_expired"
    if now >= last_seen_at + IDLE_TIMEOUT:
        return "idle_expired"
    return "live"


def needs_touch(last_seen_at: dt.datetime, now: dt.datetime) -> bool:
    """Whether a request should write the session's last-seen time: at most once a minute, so the idle
    timer is accurate to a minute (like a key's last-used time) and most page views write nothing."""
    return now - last_seen_at >= TOUCH_INTERVAL


def session_expires_at(created_at: dt.datetime, last_seen_at: dt.datetime) -> dt.datetime:
    return min(created_at + ABSOLUTE_TIMEOUT, last_seen_at + IDLE_TIMEOUT)


def totp_step(secret: str, code: str, now: dt.datetime, last_step: int) -> int | None:
    """The time step ``code`` is valid for (within the drift), or None. Steps at or before
    ``last_step`` (already used) are refused."""
    code = code.strip().replace(" ", "")
    if len(code) != 6 or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret, interval=TOTP_STEP)
    current = int(now.timestamp()) // TOTP_STEP
    for step in range(current - TOTP_DRIFT_STEPS, current + TOTP_DRIFT_STEPS + 1):
        if step > last_step and pyotp.utils.strings_equal(totp.at(step * TOTP_STEP), code):
            return step
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Throttle:
    allowed: bool
    retry_after: float = 0.0


def _retry_after(failures: Sequence[dt.datetime], limit: int, now: dt.datetime) -> float | None:
    recent = sorted(t for t in failures if t > now - THROTTLE_WINDOW)
    if len(recent) < limit:
        return None
    # Allowed again once enough of the oldest failures have left the window.
    return (recent[len(recent) - limit] + THROTTLE_WINDOW - now).total_seconds()


def sign_in_throttle(
    pair_failures: Sequence[dt.datetime],
    address_failures: Sequence[dt.datetime],
    email_failures: Sequence[dt.datetime],
    now: dt.datetime,
) -> Throttle:
    """Whether a sign-in may be tried, from the failures (and attempts under way) in the window for the
    e-mail from this source address, for the source address, and for the e-mail from anywhere.

    The lockout is keyed by (e-mail, address): five wrong passwords from one address lock that address
    out of that account, not the account. The per-e-mail ceiling is twenty times higher: it bounds how
    many guesses a distributed attacker gets at one account, at the price that twenty addresses together
    can still lock it for a window (docs/portal.md, sign-in and session rules)."""
    waits = [
        w
        for w in (
            _retry_after(pair_failures, MAX_FAILURES_PER_EMAIL_AND_ADDRESS, now),
            _retry_after(address_failures, MAX_FAILURES_PER_ADDRESS, now),
            _retry_after(email_failures, MAX_FAILURES_PER_EMAIL, now),
        )
        if w is not None
    ]
    return Throttle(True) if not waits else Throttle(False, max(waits))


def hashing_admitted(in_flight: int, workers: int, max_waiting: int) -> bool:
    """Load shedding of password hashing: whether one more sign-in (or other password check) may wait
    for the hashing workers, given ``in_flight`` already running or waiting. Past ``workers`` running
    and ``max_waiting`` waiting it is refused at once, before any hash is computed or the database is
    asked: a flood costs the service a bounded queue, never the whole machine."""
    return in_flight < max(1, workers) + max(0, max_waiting)


TOTP_ROLES = (UserRole.OWNER, UserRole.ADMIN)


def totp_enrolment_required(account_requires_totp: bool, role: str, enrolled: bool) -> bool:
    """Once an account requires TOTP, its owners and admins without it may only enrol (GitHub's 2FA
    requirement works the same way); other roles are free to enrol or not."""
    return account_requires_totp and role in TOTP_ROLES and not enrolled


def totp_removal_problem(account_requires_totp: bool, role: str, enrolled: bool) -> str | None:
    """Why a user may not turn its TOTP off (an error message naming the field), or None. Not while the
    account requires it of the user's role: the user would be held to enrolment at once."""
    if not enrolled:
        return "password: two-factor sign-in is not on"
    if totp_enrolment_required(account_requires_totp, role, False):
        return (
            "password: this account requires two-factor sign-in of owners and admins; an owner can change "
            "that on the Users page"
        )
    return None


def password_problem(password: str, email: str) -> str | None:
    """Why a new password is refused (NIST 800-63B: length, not the e-mail), or None."""
    if len(password) < MIN_PASSWORD:
        return f"must be at least {MIN_PASSWORD} characters"
    if len(password) > MAX_PASSWORD:
        return f"must be at most {MAX_PASSWORD} characters"
    if password.strip().lower() == email.strip().lower():
        return "must not be the e-mail address"
    return None


# Who an account's alert e-mails (an endpoint failing, disabled) go to: its portal owners and admins and
# the extra addresses the account sets (Account.admin_emails), at most this many.
ALERT_ROLES = (UserRole.OWNER, UserRole.ADMIN)
MAX_ALERT_RECIPIENTS = 50


@dataclasses.dataclass(frozen=True, slots=True)
class AlertRecipients:
    # Everyone alerted, sorted case-insensitively.
    all: tuple[str, ...]
    # Of ``all``, the portal owners' and admins' addresses.
    portal: tuple[str, ...]


def alert_recipients(users: Sequence[tuple[str, str]], extra: Sequence[str]) -> AlertRecipients:
    """The recipients of an account's alerts, from its portal ``users`` ((e-mail, role) in sign-up order:
    users exist once their invitation is accepted and are deleted when removed, so pending invitations
    and removed users are never here) and its ``extra`` addresses.

    Owners and admins only; each address once, compared case-insensitively (the first spelling is kept);
    blanks dropped; sorted case-insensitively. Past MAX_ALERT_RECIPIENTS the owners are kept first, then
    the extra addresses (chosen for this purpose), then admins by sign-up.
    """
    owners = [e for e, r in users if r == UserRole.OWNER]
    admins = [e for e, r in users if r == UserRole.ADMIN]
    kept: dict[str, str] = {}
    portal: set[str] = set()
    for address, from_portal in [
        *((e, True) for e in owners),
        *((e, False) for e in extra),
        *((e, True) for e in admins),
    ]:
        address = address.strip()
        key = address.casefold()
        if not address or (len(kept) >= MAX_ALERT_RECIPIENTS and key not in kept):
            continue
        kept.setdefault(key, address)
        if from_portal:
            portal.add(key)
    order = sorted(kept)
    return AlertRecipients(tuple(kept[k] for k in order), tuple(kept[k] for k in order if k in portal))

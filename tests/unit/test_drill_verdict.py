"""The drill's judgements (scripts/drillkit/verdict.py): a re-send is "after a lease" only when every one
waited for the lease; a 500 on either try fails the run and a 503 does not; what counts as a body showing
the service's insides; which counts fail the run."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / "scripts"))

from drillkit.verdict import (
    AFTER_A_LEASE,
    NOT_AFTER_A_LEASE,
    duplicate_kind,
    failures,
    is_500,
    leak_in,
)


@pytest.mark.parametrize(
    ("times", "lease", "kind"),
    [
        ([100.0, 121.0], 20.0, AFTER_A_LEASE),  # sent again once the lease ran out
        ([100.0, 116.0], 20.0, AFTER_A_LEASE),  # the lease counts from the claim, before the send
        ([100.0, 115.9], 20.0, NOT_AFTER_A_LEASE),
        ([100.0, 100.3], 20.0, NOT_AFTER_A_LEASE),  # two sends at once: no lease explains it
        ([121.0, 100.0], 20.0, AFTER_A_LEASE),  # in any order
        ([100.0, 121.0, 121.5], 20.0, NOT_AFTER_A_LEASE),  # one re-send after the lease, one not
        ([100.0, 161.0, 222.0], 60.0, AFTER_A_LEASE),
    ],
)
def test_a_duplicate_is_after_a_lease_only_when_every_resend_waited_for_it(
    times: list[float], lease: float, kind: str
) -> None:
    assert duplicate_kind(times, lease) == kind


@pytest.mark.parametrize(
    ("status", "first_error", "fails"),
    [
        ("500", "", True),
        ("200", "500 internal_error (edge#1)", True),  # the retry hid it from the partner, not from us
        ("503", "503 service_unavailable, Retry-After 5 (edge#1)", False),  # the documented outage answer
        ("201", "ConnectError (edge#2)", False),
        ("ConnectError", "ConnectError (edge#1)", False),
        ("502", "", False),
        ("5000", "", False),
    ],
)
def test_a_500_on_either_try_fails_the_run(status: str, first_error: str, fails: bool) -> None:
    assert is_500(status, first_error) is fails


@pytest.mark.parametrize(
    ("body", "leak"),
    [
        ('{"error": {"type": "service_unavailable", "message": "try again"}}', ""),
        ("Traceback (most recent call last):\n  ...", "Traceback (most recent call last)"),
        ('  File "/srv/app/edge/server.py", line 12, in x', 'File "/srv/app/edge/server.py", line 12'),
        ("could not run SELECT id FROM auth_keys", "SELECT"),
        ("see /opt/travel/app/svckit/db.py", "/opt/travel/app/svckit/db.py"),
        ("asyncpg.exceptions.CannotConnectNowError", "asyncpg"),
        ('{"message": "selected offers"}', ""),  # words that only contain a keyword
        ('{"docUrl": "https://docs.example/errors#service_unavailable"}', ""),
    ],
)
def test_bodies_showing_internals(body: str, leak: str) -> None:
    assert leak_in(body) == leak


def test_only_nonzero_failing_counts_fail_the_run() -> None:
    counts = {
        "lost events": 0,
        "500s": 2,
        "bad signatures": 0,
        "partner errors": 40,
        "revoked keys still accepted": 1,
    }
    assert failures(counts) == {"500s": 2, "revoked keys still accepted": 1}
    assert failures({"lost events": 0, "partner errors": 12}) == {}

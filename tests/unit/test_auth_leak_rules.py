"""authsvc._leak_rules: what a leak report does to a key (a table of cases), and the reason it records."""

from __future__ import annotations

import datetime as dt

import pytest

from authsvc._leak_rules import LeakAction, clip, leak_action, leak_reason
from authsvc._model import ApiKey

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def key(**fields: object) -> ApiKey:
    base: dict[str, object] = {
        "id": "key_1",
        "account_id": "acct_1",
        "environment": "live",
        "name": "n",
        "scopes": (),
        "allowed_sources": (),
        "hint": "svc_live_...abcd",
        "secret_hash": "0" * 64,
        "created_at": NOW - 24 * HOUR,
    }
    return ApiKey(**{**base, **fields})  # type: ignore[arg-type]


CASES = [
    ("active", key(), LeakAction.REVOKE),
    # A rotated-out secret still in its overlap dies at once: rotation's grace is not for a public secret.
    ("rotated out, in overlap", key(expires_at=NOW + HOUR, rotated_to_key_id="key_2"), LeakAction.REVOKE),
    ("expiring (no successor)", key(expires_at=NOW + HOUR), LeakAction.REVOKE),
    ("revoked before", key(revoked_at=NOW - HOUR), LeakAction.ALREADY_DEAD),
    ("expired", key(expires_at=NOW - HOUR, rotated_to_key_id="key_2"), LeakAction.ALREADY_DEAD),
    ("expires this instant", key(expires_at=NOW), LeakAction.ALREADY_DEAD),
]


@pytest.mark.parametrize(("name", "subject", "expected"), CASES, ids=[c[0] for c in CASES])
def test_leak_action(name: str, subject: ApiKey, expected: LeakAction) -> None:
    assert leak_action(subject, NOW) is expected


@pytest.mark.parametrize(
    ("url", "source", "reporter", "reason"),
    [
        ("https://x.example/a", "content", "GitHub secret scanning",
         "found in public at https://x.example/a (GitHub secret scanning, content)"),
        ("", "", "GitLab token revocation", "found in public (GitLab token revocation)"),
        ("https://x.example/a", "", "", "found in public at https://x.example/a"),
    ],
)  # fmt: skip
def test_leak_reason(url: str, source: str, reporter: str, reason: str) -> None:
    assert leak_reason(url, source, reporter) == reason


def test_clip_drops_control_characters_and_bounds_length() -> None:
    assert clip("a\nb\x00c", 10) == "abc"
    assert clip("x" * 50, 10) == "xxxxxxx..."

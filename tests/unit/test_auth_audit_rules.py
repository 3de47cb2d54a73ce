"""What RecordAuditEvent writes and refuses (authsvc._audit_rules), by table."""

from __future__ import annotations

from typing import Any

import pytest

from authsvc._audit_rules import RECORDED_ACTIONS, recorded_event_problem, role_action

EP = {"endpoint_id": "we_1", "environment": "live"}
API_KEY = "svc_live_" + "A" * 40
SIGNING = "whsec_" + "B" * 40

CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], str | None]] = [
    # (name, action, before, after, problem starts with)
    (
        "created",
        "webhook_endpoint.created",
        {},
        {**EP, "url": "https://h.example/x", "events": ["a.b"]},
        None,
    ),
    ("updated", "webhook_endpoint.updated", {"url": "https://a.example"}, {"url": "https://b.example"}, None),
    ("rotated, overlap only", "webhook_endpoint.secret_rotated", {}, {**EP, "overlap_seconds": 86400}, None),
    ("resent", "webhook_attempt.resent", {}, {"attempt_id": "att_1", "delivery_id": "msg_1"}, None),
    ("no details", "webhook_endpoint.enabled", {}, {}, None),
    ("unknown action", "webhook_endpoint.exploded", {}, EP, "action:"),
    ("no action", "", {}, EP, "action:"),
    # authsvc writes key and user records itself: nobody may write one that never happened.
    ("a key action", "key.revoked", {}, {"key_id": "key_1"}, "action:"),
    ("a user action", "user.removed", {}, {}, "action:"),
    ("a signing secret value", "webhook_endpoint.secret_rotated", {}, {**EP, "new": SIGNING}, "after:"),
    ("an API key in a list", "webhook_endpoint.updated", {"events": ["x", API_KEY]}, {}, "before:"),
    ("an API key deep inside", "webhook_endpoint.created", {}, {"a": {"b": [{"c": API_KEY}]}}, "after:"),
    ("a field named secret", "webhook_endpoint.secret_rotated", {}, {"signing_secret": "x"}, "after:"),
    ("a field named password", "webhook_endpoint.created", {}, {"Password": ""}, "after:"),
    ("a field named token", "webhook_attempt.resent", {"session_token": "x"}, {}, "before:"),
    ("a field named api key", "webhook_endpoint.created", {}, {"apiKey": "x"}, "after:"),
    (
        "too large",
        "webhook_endpoint.updated",
        {"description": "x" * 5000},
        {"description": "y" * 5000},
        "after:",
    ),
]


@pytest.mark.parametrize(("name", "action", "before", "after", "problem"), CASES, ids=[c[0] for c in CASES])
def test_recorded_event_problem(
    name: str, action: str, before: dict[str, Any], after: dict[str, Any], problem: str | None
) -> None:
    found = recorded_event_problem(action, before, after)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem)
        assert "AAAA" not in found and "BBBB" not in found  # the error never repeats the secret


def test_every_recorded_action_needs_a_role_action_of_webhooks() -> None:
    assert {role_action(a) for a in RECORDED_ACTIONS} == {"webhooks.write"}

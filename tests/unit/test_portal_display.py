"""The audit trail's change column (portal.display.changes): fields and plain values, not JSON."""

from __future__ import annotations

from portal.display import changes
from travel.auth.v1 import auth_pb2 as apb


def test_changes_are_fields_with_plain_values() -> None:
    event = apb.AuditEvent()
    event.before.update({"scopes": ["hotels:read"], "rate_limit": 0, "name": "a"})
    event.after.update(
        {"scopes": ["hotels:read", "account:read"], "rate_limit": 7, "endpoint_id": "we_1", "on": True}
    )
    assert changes(event) == [
        ("name", "a", None),
        ("on", None, "yes"),
        ("rate_limit", "0", "7"),
        ("scopes", "hotels:read", "hotels:read, account:read"),
    ]


def test_no_change_no_rows() -> None:
    assert changes(apb.AuditEvent()) == []

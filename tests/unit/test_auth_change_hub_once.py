"""ChangeHub.publish_once: a process's own change, heard from its handler and from its listener's NOTIFY in
either order, reaches callbacks and watchers once; distinct changes each reach them."""

from __future__ import annotations

import datetime as dt

from authsvc._model import KeyChange
from authsvc._watch import RECENT_OWN, ChangeHub

AT = dt.datetime(2026, 11, 29, 5, 40, 1, 123456, tzinfo=dt.UTC)


def _hub() -> tuple[ChangeHub, list[KeyChange]]:
    hub = ChangeHub()
    seen: list[KeyChange] = []
    hub.on_change(seen.append)
    return hub, seen


def test_the_same_change_twice_is_published_once() -> None:
    hub, seen = _hub()
    change = KeyChange("revoked", "key_1", "acct_1", AT)
    # The listener's copy is rebuilt from the NOTIFY's float timestamp.
    heard = KeyChange("revoked", "key_1", "acct_1", dt.datetime.fromtimestamp(AT.timestamp(), dt.UTC))
    assert hub.publish_once(heard) is True
    assert hub.publish_once(change) is False
    assert seen == [heard]


def test_distinct_changes_are_each_published() -> None:
    hub, seen = _hub()
    cases = [
        KeyChange("revoked", "key_1", "acct_1", AT),
        KeyChange("revoked", "key_2", "acct_1", AT),
        KeyChange("updated", "key_1", "acct_1", AT),
        KeyChange("revoked", "key_1", "acct_1", AT + dt.timedelta(microseconds=1)),
        KeyChange("account_updated", "", "acct_1", AT),
    ]
    assert [hub.publish_once(c) for c in cases] == [True] * len(cases)
    assert seen == cases


def test_only_the_newest_are_remembered() -> None:
    hub, seen = _hub()
    first = KeyChange("revoked", "key_0", "acct_1", AT)
    hub.publish_once(first)
    for n in range(1, RECENT_OWN + 1):
        hub.publish_once(KeyChange("revoked", f"key_{n}", "acct_1", AT))
    assert hub.publish_once(first) is True  # forgotten: published again, which only drops an entry twice
    assert len(seen) == RECENT_OWN + 2

"""The portal's one-time flashes (portal.flash), by table: opened only with the portal's key, for the
session and cookie they were sealed for, unchanged and unexpired."""

from __future__ import annotations

import pytest

from portal import flash

KEY = flash.flash_key(b"k" * 32)
NOW = 1_800_000_000.0
SEALED = flash.seal(KEY, "ps_session", flash.SECRET_COOKIE, {"s": "svc_test_x"}, now=NOW)


def flipped(value: str) -> str:
    return value[:10] + ("A" if value[10] != "A" else "B") + value[11:]


CASES = [
    # (name, key, session token, cookie, value, now, opens)
    ("the same session, in time", KEY, "ps_session", flash.SECRET_COOKIE, SEALED, NOW + 1, True),
    ("another session", KEY, "ps_other", flash.SECRET_COOKIE, SEALED, NOW + 1, False),
    ("another cookie's name", KEY, "ps_session", flash.NOTICE_COOKIE, SEALED, NOW + 1, False),
    ("another key", flash.flash_key(b"o" * 32), "ps_session", flash.SECRET_COOKIE, SEALED, NOW, False),
    ("expired", KEY, "ps_session", flash.SECRET_COOKIE, SEALED, NOW + flash.TTL + 1, False),
    ("one byte changed", KEY, "ps_session", flash.SECRET_COOKIE, flipped(SEALED), NOW, False),
    ("cut short", KEY, "ps_session", flash.SECRET_COOKIE, SEALED[:8], NOW, False),
    ("not base64", KEY, "ps_session", flash.SECRET_COOKIE, "%%%", NOW, False),
    ("empty", KEY, "ps_session", flash.SECRET_COOKIE, "", NOW, False),
]


@pytest.mark.parametrize(
    ("name", "key", "token", "cookie", "value", "now", "opens"), CASES, ids=[c[0] for c in CASES]
)
def test_unseal(name: str, key: bytes, token: str, cookie: str, value: str, now: float, opens: bool) -> None:
    got = flash.unseal(key, token, cookie, value, now=now)
    assert (got is not None) is opens
    if opens:
        assert got is not None and got["s"] == "svc_test_x"


def test_sealed_is_unreadable_and_fresh_each_time() -> None:
    assert "svc_test_x" not in SEALED
    assert flash.seal(KEY, "ps_session", flash.SECRET_COOKIE, {"s": "svc_test_x"}, now=NOW) != SEALED
    assert flash.flash_key(b"k" * 32) != b"k" * 32


# Spent: (sealed id, its expiry, now) in turn -> shown?
@pytest.mark.parametrize(
    ("case", "views", "shown"),
    [
        ("first view", [(b"a", 700, 100)], [True]),
        ("the same cookie again: spent (issue 34)", [(b"a", 700, 100), (b"a", 700, 101)], [True, False]),
        ("another cookie", [(b"a", 700, 100), (b"b", 700, 101)], [True, True]),
        ("again after it expired: forgotten (its seal refuses it anyway)",
         [(b"a", 700, 100), (b"a", 700, 701)], [True, True]),
        ("again at its last second: still spent", [(b"a", 700, 100), (b"a", 700, 700)], [True, False]),
    ],
)  # fmt: skip
def test_spent(case: str, views: list[tuple[bytes, int, float]], shown: list[bool]) -> None:
    spent = flash.Spent()
    assert [spent.first_view(s, exp, now) for s, exp, now in views] == shown, case


def test_spent_is_bounded_oldest_first() -> None:
    spent = flash.Spent(size=2)
    assert all(spent.first_view(s, 700, 100) for s in (b"a", b"b", b"c"))
    assert spent.first_view(b"a", 700, 100)  # pushed out by c: the oldest go first
    assert not spent.first_view(b"c", 700, 100)
    assert flash.sealed_id("x") == flash.sealed_id("x") != flash.sealed_id("y")

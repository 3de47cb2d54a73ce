"""The edge's authorisation cache (edge.authcache): TTLs, drops, denials and when a cached answer
is served, by table."""

from __future__ import annotations

import datetime as dt

import pytest

from edge.authcache import (
    HOLD,
    MAX_HELD,
    WATCH_GRACE,
    WATCH_SILENCE,
    Answer,
    AuthCache,
    CacheUse,
    Caller,
    cache_use,
    ttl_for,
)


# -- authorisation cache ----------------------------------------------------------------------------------
def caller(key_id: str = "key_1", account_id: str = "acct_1") -> Caller:
    return Caller(
        key_id=key_id,
        account_id=account_id,
        environment="live",
        scopes=("account:read",),
        key_status="active",
    )


def allow(key_id: str = "key_1", account_id: str = "acct_1") -> Answer:
    return Answer(True, caller=caller(key_id, account_id))


NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("answer_ttl", "expires_in", "expected"),
    [
        (30.0, None, 30.0),
        (600.0, None, 60.0),  # never more than 60 s
        (60.0, 10.0, 10.0),  # never past the key's expiry
        (60.0, -5.0, 0.0),
        (-1.0, None, 0.0),
        (0.0, 100.0, 0.0),
    ],
)
def test_ttl_for(answer_ttl: float, expires_in: float | None, expected: float) -> None:
    expires = NOW + dt.timedelta(seconds=expires_in) if expires_in is not None else None
    assert ttl_for(answer_ttl, expires, NOW) == expected


def test_cache_hit_and_expiry() -> None:
    cache = AuthCache()
    assert cache.put(("k",), allow(), 10, now=100.0, generation=cache.generation)
    assert cache.get(("k",), 109.9) == allow()
    assert cache.get(("k",), 110.0) is None
    assert len(cache) == 0


def test_cache_zero_ttl_is_not_stored() -> None:
    cache = AuthCache()
    assert not cache.put(("k",), allow(), 0, now=0.0, generation=cache.generation)
    assert cache.get(("k",), 0.0) is None


@pytest.mark.parametrize(
    ("drop", "survivors"),
    [
        (lambda c: c.drop_key("key_1"), {"b", "c"}),
        (lambda c: c.drop_key("key_2"), {"a", "a2", "c"}),
        (lambda c: c.drop_account("acct_1"), {"c"}),
        (lambda c: c.drop_account("acct_2"), {"a", "a2", "b"}),
        (lambda c: c.drop_key("key_unknown"), {"a", "a2", "b", "c"}),
        (lambda c: c.flush(), set()),
    ],
)
def test_cache_drops(drop, survivors: set[str]) -> None:
    cache = AuthCache()
    entries = {
        "a": allow("key_1", "acct_1"),
        "a2": allow("key_1", "acct_1"),  # same key, another scope
        "b": allow("key_2", "acct_1"),
        "c": allow("key_3", "acct_2"),
    }
    for name, answer in entries.items():
        cache.put((name,), answer, 60, 0.0, cache.generation)
    drop(cache)
    assert {n for n in entries if cache.get((n,), 1.0) is not None} == survivors


def test_answer_fetched_before_a_drop_is_not_stored_after_it() -> None:
    cache = AuthCache()
    generation = cache.generation  # a request starts asking authsvc...
    cache.drop_key("key_1")  # ...the key is revoked meanwhile...
    assert not cache.put(("k",), allow(), 60, 0.0, generation)  # ...and the stale ALLOW is dropped
    assert cache.get(("k",), 0.0) is None


def test_denials_without_a_key_are_cached_and_flushed() -> None:
    cache = AuthCache()
    deny = Answer(False, "invalid_api_key", "Invalid API key provided.")
    assert cache.put(("k",), deny, 60, 0.0, cache.generation)
    assert cache.get(("k",), 1.0) == deny
    cache.flush()
    assert cache.get(("k",), 1.0) is None


@pytest.mark.parametrize(
    ("down_since", "now", "expected"),
    [
        (None, 1000.0, CacheUse.FIRST),  # the watch is up (its SYNC arrived): the cache answers first
        (100.0, 100.0, CacheUse.FALLBACK),  # it just broke: ask authsvc, the cache if it cannot be reached
        (100.0, 100.0 + WATCH_GRACE, CacheUse.FALLBACK),
        (100.0, 100.0 + WATCH_GRACE + 0.001, CacheUse.NEVER),  # no watch for longer: fail closed
        (100.0, 101.0, CacheUse.NEVER),
        (100.0, 10_000.0, CacheUse.NEVER),
    ],
)
def test_cache_use(down_since: float | None, now: float, expected: CacheUse) -> None:
    assert cache_use(down_since, now) is expected


@pytest.mark.parametrize(
    ("down_since", "heard", "now", "expected"),
    [
        (None, None, 50.0, CacheUse.FIRST),  # an authsvc without heartbeats: only a break counts
        (None, 100.0, 100.0 + WATCH_SILENCE, CacheUse.FIRST),  # heard from recently enough
        (None, 100.0, 100.0 + WATCH_SILENCE + 0.01, CacheUse.FALLBACK),  # silent: as if broken then
        (None, 100.0, 100.0 + WATCH_SILENCE + WATCH_GRACE, CacheUse.FALLBACK),
        (None, 100.0, 100.0 + WATCH_SILENCE + WATCH_GRACE + 0.01, CacheUse.NEVER),
        (100.0, 99.9, 100.4, CacheUse.FALLBACK),  # broken before it went silent: the break counts
        (100.0, 99.9, 100.6, CacheUse.NEVER),
        (100.0, 99.0, 100.4, CacheUse.NEVER),  # silent since 99.5, then broken: the earlier counts
    ],
)
def test_cache_use_of_a_silent_watch(
    down_since: float | None, heard: float | None, now: float, expected: CacheUse
) -> None:
    assert cache_use(down_since, now, heard) is expected


def test_nothing_cached_is_served_a_second_after_the_watch_was_last_heard() -> None:
    assert WATCH_SILENCE + WATCH_GRACE <= 1.0


def deny() -> Answer:
    return Answer(False, "invalid_api_key", "Invalid API key provided.")


def test_denials_of_unknown_keys_are_a_bounded_lru() -> None:
    cache = AuthCache(max_entries=10, max_denials=3)
    cache.put(("allow",), allow(), 60, 0.0, cache.generation)
    for i in range(1000):
        assert cache.put((f"d{i}",), deny(), 60, 0.0, cache.generation)
        assert cache.denials <= 3
    assert cache.denials == 3
    assert cache.get(("allow",), 1.0) == allow()  # a flood of denials never evicts an allow
    assert [n for n in ("d996", "d997", "d998", "d999") if cache.get((n,), 1.0)] == ["d997", "d998", "d999"]
    cache.get(("d997",), 1.0)  # used: now the most recent
    cache.put(("new",), deny(), 60, 1.0, cache.generation)
    assert cache.get(("d998",), 1.0) is None  # the least recently used went
    assert cache.get(("d997",), 1.0) == deny()
    assert len(cache) == 1 + 3


@pytest.mark.parametrize(
    ("max_denials", "held"),
    [(0, 0), (1, 1), (5, 5), (10_000, 50)],
)
def test_denial_cache_never_exceeds_its_bound(max_denials: int, held: int) -> None:
    cache = AuthCache(max_denials=max_denials)
    for i in range(50):
        cache.put((f"d{i}",), deny(), 60, 0.0, cache.generation)
    assert cache.denials == held


def test_denials_expire_and_drop_with_a_flush() -> None:
    cache = AuthCache(max_denials=3)
    cache.put(("d",), deny(), 5, 0.0, cache.generation)
    assert cache.get(("d",), 5.0) is None and cache.denials == 0
    cache.put(("d",), deny(), 5, 0.0, cache.generation)
    cache.flush()
    assert cache.denials == 0
    generation = cache.generation
    cache.drop_key("key_1")
    assert not cache.put(("d",), deny(), 5, 0.0, generation)  # fetched before a drop: not stored


def test_cache_is_bounded() -> None:
    cache = AuthCache(max_entries=2)
    cache.put(("a",), allow(), 1, 0.0, cache.generation)
    cache.put(("b",), allow(), 60, 0.0, cache.generation)
    assert cache.put(("c",), allow(), 60, 5.0, cache.generation)  # "a" expired and was evicted
    assert not cache.put(("d",), allow(), 60, 5.0, cache.generation)
    assert len(cache) == 2


@pytest.mark.parametrize(
    ("kind", "ident", "stored_after", "revoked"),
    [
        # (held kind, id, put at 1 s of an answer about key_1 of acct_1 stored?, key_1 refused?)
        ("key", "key_1", False, False),
        ("revoked", "key_1", False, True),
        ("account", "acct_1", False, False),
        ("key", "key_2", True, False),  # another key
        ("revoked", "key_2", True, False),
        ("account", "acct_2", True, False),  # another account
    ],
)
def test_no_answer_about_a_changed_key_or_account_is_kept_for_the_hold(
    kind: str, ident: str, stored_after: bool, revoked: bool
) -> None:
    cache = AuthCache()
    cache.hold(kind, ident, 0.0)
    assert cache.put(("k",), allow(), 60, 1.0, cache.generation) is stored_after
    assert cache.revoked("key_1", 1.0) is revoked
    # After HOLD every authsvc has let go of what it knew before the change: kept again.
    assert cache.put(("k",), allow(), 60, HOLD, cache.generation)
    assert not cache.revoked("key_1", HOLD)


def test_holds_are_bounded_and_let_go_when_over() -> None:
    cache = AuthCache()
    for i in range(MAX_HELD + 10):
        cache.hold("key", f"key_{i}", 0.0)
    assert len(cache._held) == MAX_HELD
    cache.hold("key", "key_last", HOLD)  # every earlier hold is over by then
    assert list(cache._held) == [("key", "key_last")]

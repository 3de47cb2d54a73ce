"""Authorizer.cached inlines cache_use's FIRST (every request passes there): by table, it answers from
the cache exactly when cache_use says FIRST, at the edges of the watch's silence included."""

from __future__ import annotations

import pytest

from edge.authcache import WATCH_SILENCE, Answer, CacheUse, Caller, cache_use
from edge.authorizer import Authorizer, key_digest
from edge.environments import Environment
from svckit.clients import AuthClient

NOW = 1000.0
# (watch down since, watch last heard): None for "up" / "does not heartbeat"
STATES = [
    (None, None),
    (None, NOW),
    (None, NOW - WATCH_SILENCE / 2),
    (None, NOW - WATCH_SILENCE),  # silent exactly as long as allowed
    (None, NOW - WATCH_SILENCE - 0.001),
    (None, NOW - 60.0),
    (NOW, None),
    (NOW - 0.1, None),
    (NOW - 0.1, NOW),
    (NOW - 60.0, NOW - 60.0),
]


@pytest.mark.parametrize(("down_since", "heard"), STATES, ids=[f"down={d},heard={h}" for d, h in STATES])
async def test_cached_answers_first_exactly_when_cache_use_says_first(
    down_since: float | None, heard: float | None
) -> None:
    async with AuthClient("127.0.0.1:1", None) as auth:
        authz = Authorizer(auth, monotonic=lambda: NOW)
        digest = key_digest("svc_test_" + "a" * 40)
        caller = Caller(
            key_id="key_1", account_id="acct_1", environment="sandbox", scopes=(), key_status="active"
        )
        allow = Answer(True, caller=caller)
        ck = (digest, Environment.SANDBOX, "account:read", "127.0.0.1", False)
        authz.cache.put(ck, allow, 60, NOW, authz.cache.generation)
        authz.watch_down_since, authz.watch_heard = down_since, heard
        first = cache_use(down_since, NOW, heard) is CacheUse.FIRST
        got = authz.cached(digest, Environment.SANDBOX, "account:read", "127.0.0.1", False)
        assert (got is allow) is first
        assert got is None or first


async def test_cached_misses_an_expired_answer() -> None:
    async with AuthClient("127.0.0.1:1", None) as auth:
        authz = Authorizer(auth, monotonic=lambda: NOW)
        authz.watch_down_since = None
        digest = key_digest("svc_test_" + "b" * 40)
        caller = Caller(
            key_id="key_2", account_id="acct_2", environment="sandbox", scopes=(), key_status="active"
        )
        ck = (digest, Environment.SANDBOX, "account:read", "127.0.0.1", False)
        authz.cache.put(ck, Answer(True, caller=caller), 1.0, NOW - 2.0, authz.cache.generation)
        assert authz.cached(digest, Environment.SANDBOX, "account:read", "127.0.0.1", False) is None

"""The Authorizer's handling of WatchKeyChanges messages and of an unreachable authsvc, by table (no
server: the channel never connects)."""

from __future__ import annotations

import pytest

from edge.authcache import Answer, Caller
from edge.authorizer import Authorizer, key_digest
from svckit.clients import AuthClient
from travel.auth.v1 import auth_pb2 as pb


def answer(key_id: str, account_id: str) -> Answer:
    return Answer(
        True,
        caller=Caller(
            key_id=key_id, account_id=account_id, environment="live", scopes=(), key_status="active"
        ),
    )


@pytest.mark.parametrize(
    ("kind", "key_id", "account_id", "survivors", "live_after"),
    [
        (pb.KEY_CHANGE_KIND_SYNC, "", "", set(), True),
        (pb.KEY_CHANGE_KIND_REVOKED, "key_1", "acct_1", {"b", "c"}, False),
        (pb.KEY_CHANGE_KIND_ROTATED, "key_1", "acct_1", {"b", "c"}, False),
        (pb.KEY_CHANGE_KIND_UPDATED, "key_2", "acct_1", {"a", "c"}, False),
        (pb.KEY_CHANGE_KIND_ACCOUNT_UPDATED, "", "acct_1", {"c"}, False),
        (pb.KEY_CHANGE_KIND_UNSPECIFIED, "", "", set(), False),  # unknown: drop everything
    ],
)
async def test_apply_change(
    kind: int, key_id: str, account_id: str, survivors: set[str], live_after: bool
) -> None:
    async with AuthClient("127.0.0.1:1", None) as auth:
        authz = Authorizer(auth, monotonic=lambda: 0.0)
        cache = authz.cache
        for name, (k, a) in {
            "a": ("key_1", "acct_1"),
            "b": ("key_2", "acct_1"),
            "c": ("key_3", "acct_2"),
        }.items():
            cache.put((name,), answer(k, a), 60, 0.0, cache.generation)
        seen: list[tuple[int, str, str]] = []
        authz.add_listener(lambda *change: seen.append(change))
        authz.apply_change(kind, key_id, account_id)
        assert {n for n in "abc" if cache.get((n,), 1.0) is not None} == survivors
        assert (authz.watch_down_since is None) is live_after
        assert seen == [(kind, key_id, account_id)]


async def test_fails_closed_without_authsvc_and_without_a_cached_answer() -> None:
    from edge.environments import Environment
    from edge.exceptions import EdgeError

    async with AuthClient("127.0.0.1:1", None, timeout=1.0) as auth:
        authz = Authorizer(auth)
        with pytest.raises(EdgeError) as info:
            await authz.authorize(
                "svc_test_" + "a" * 40, Environment.SANDBOX, "account:read", "127.0.0.1", False, "req_1"
            )
        assert info.value.type == "service_unavailable"


@pytest.mark.parametrize(
    ("down_for", "expected"),
    [
        (0.0, "allowed"),  # the watch just broke: the cached allow stands in for an unreachable authsvc
        (0.5, "allowed"),
        (0.51, "service_unavailable"),  # no watch for longer: fail closed, whatever is cached
        (1.0, "service_unavailable"),
        (60.0, "service_unavailable"),
    ],
)
async def test_cached_allow_stands_in_for_authsvc_only_just_after_the_watch_broke(
    down_for: float, expected: str
) -> None:
    from edge.environments import Environment
    from edge.exceptions import EdgeError

    now = [100.0]
    async with AuthClient("127.0.0.1:1", None, timeout=1.0) as auth:
        authz = Authorizer(auth, monotonic=lambda: now[0])
        args = ("svc_test_x", Environment.SANDBOX, "account:read", "127.0.0.1", False, "req_1")
        authz.apply_change(pb.KEY_CHANGE_KIND_SYNC, "", "")  # the watch is up...
        ck = (key_digest("svc_test_x"), *args[1:5])
        authz.cache.put(ck, answer("key_1", "acct_1"), 60, now[0], authz.cache.generation)
        assert (await authz.authorize(*args)).key_id == "key_1"  # ...and the cache answers first
        authz.watch_down_since = now[0]  # the watch breaks (what watch_forever records)
        now[0] += down_for
        try:
            outcome = "allowed" if (await authz.authorize(*args)).key_id == "key_1" else "?"
        except EdgeError as exc:
            outcome = exc.type
        assert outcome == expected

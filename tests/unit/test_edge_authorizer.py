"""The Authorizer's handling of WatchKeyChanges messages, by table (no server: the channel never connects)."""

from __future__ import annotations

import grpc
import pytest

from edge.authcache import Answer, Caller
from edge.authorizer import Authorizer
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
    async with grpc.aio.insecure_channel("127.0.0.1:1") as channel:
        authz = Authorizer(channel, monotonic=lambda: 0.0)
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
        assert cache.live is live_after
        assert seen == [(kind, key_id, account_id)]


async def test_fails_closed_without_authsvc_and_without_a_cached_answer() -> None:
    from edge.environments import Environment
    from edge.exceptions import EdgeError

    async with grpc.aio.insecure_channel("127.0.0.1:1") as channel:
        authz = Authorizer(channel, timeout=1.0)
        with pytest.raises(EdgeError) as info:
            await authz.authorize(
                "svc_test_" + "a" * 40, Environment.SANDBOX, "account:read", "127.0.0.1", False, "req_1"
            )
        assert info.value.type == "service_unavailable"

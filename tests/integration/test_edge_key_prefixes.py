"""A deployment's own key prefix (``--key-prefixes acme,svc``): the edge's refusal of malformed keys and its
made-up-key budget hold for every configured prefix, and a key of a brand not configured is refused like
any malformed key -- all without asking authsvc (an edge process in front of the counting AuthService of
test_edge_key_checks)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import httpx
import pytest

from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from svckit.apikeys import checksum
from svckit.ids import random_base62
from tests.integration.test_edge_key_checks import CountingAuth, counting_auth
from tests.support import ServiceProcess

__all__ = ["counting_auth"]  # the fixture, used here
BURST = 3


@pytest.fixture
def edge(counting_auth: tuple[CountingAuth, str], tmp_path: pathlib.Path) -> Iterator[ServiceProcess]:
    _, target = counting_auth
    args = edge_args(target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    flags = ["--key-prefixes", "acme,svc", "--unknown-key-rate", "0.001", "--unknown-key-burst", str(BURST)]
    proc = ServiceProcess("edge", [*args, *flags]).start(tmp_path / "edge.log")
    try:
        yield proc
    finally:
        proc.terminate()


def key(prefix: str, valid_checksum: bool = True) -> str:
    body = prefix + random_base62(32)
    check = checksum(body)
    if not valid_checksum:
        check = check[:-1] + ("A" if check[-1] != "A" else "B")
    return body + check


async def status(
    client: httpx.AsyncClient, edge: ServiceProcess, secret: str, host: str = SANDBOX_HOST
) -> tuple[int, str]:
    port = edge.ports["sandbox_port" if host == SANDBOX_HOST else "live_port"]
    resp = await client.get(
        f"http://127.0.0.1:{port}/v1/account", headers={"Host": host, "Authorization": f"Svc {secret}"}
    )
    return resp.status_code, resp.json()["error"]["type"]


@pytest.mark.parametrize("prefix", ["acme_test_", "svc_test_"])
async def test_each_prefix_is_checked_and_budgeted(
    counting_auth: tuple[CountingAuth, str], edge: ServiceProcess, prefix: str
) -> None:
    auth, _ = counting_auth
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(20):  # a bad checksum: refused here, never asked about
            assert await status(client, edge, key(prefix, valid_checksum=False)) == (401, "invalid_api_key")
        assert auth.authorized == []
        made_up = [key(prefix) for _ in range(BURST)]
        for secret in made_up:  # well-formed: asked about, within the budget
            assert await status(client, edge, secret) == (401, "invalid_api_key")
        assert auth.authorized == made_up
        for _ in range(10):  # past the budget: 429, authsvc not asked
            assert await status(client, edge, key(prefix)) == (429, "rate_limited")
        assert auth.authorized == made_up


async def test_unconfigured_brands_and_wrong_environments_never_reach_authsvc(
    counting_auth: tuple[CountingAuth, str], edge: ServiceProcess
) -> None:
    auth, _ = counting_auth
    async with httpx.AsyncClient(timeout=10) as client:
        for prefix in ("other_test_", "acm_test_", "acme_prod_", "acmesvc_test_"):
            assert await status(client, edge, key(prefix)) == (401, "invalid_api_key")
        # A live key of either brand on the sandbox host: environment_mismatch, decided from the prefix.
        for prefix in ("acme_live_", "svc_live_"):
            assert await status(client, edge, key(prefix)) == (401, "environment_mismatch")
        assert await status(client, edge, key("acme_test_"), LIVE_HOST) == (401, "environment_mismatch")
        r = await client.get(
            f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account",
            headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {key('acme_live_')}"},
        )
        assert "(acme_live_)" in r.json()["error"]["message"]  # the key's own brand, not the default
        assert auth.authorized == []


async def test_a_deployment_issues_keys_under_its_own_brand_and_keeps_the_earlier_ones(
    tmp_path: pathlib.Path,
) -> None:
    """Real authsvc and edge, both with --key-prefixes acme,svc: new keys are acme_..., and a key issued
    under svc before the brand changed keeps working."""
    import grpc

    from tests.support import sqlite_url, start_service
    from travel.auth.v1 import auth_pb2 as pb
    from travel.auth.v1 import auth_pb2_grpc

    actor = pb.Actor(user="ops@partner.example")
    db = sqlite_url(tmp_path, "a.db")
    procs: list[ServiceProcess] = []
    try:
        before = start_service("authsvc", tmp_path, db)  # the default brand
        procs.append(before)
        async with grpc.aio.insecure_channel(before.grpc_target) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)
            account = (await stub.CreateAccount(pb.CreateAccountRequest(name="P", actor=actor))).account
            request = pb.CreateKeyRequest(
                account_id=account.id,
                environment=pb.ENVIRONMENT_SANDBOX,
                scopes=["account:read"],
                actor=actor,
            )
            old = (await stub.CreateKey(request)).secret
        before.terminate()
        procs.remove(before)
        auth = start_service("authsvc", tmp_path, db, "--key-prefixes", "acme,svc")
        procs.append(auth)
        args = edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
        edge = ServiceProcess("edge", [*args, "--key-prefixes", "acme,svc"]).start(tmp_path / "edge.log")
        procs.append(edge)
        async with grpc.aio.insecure_channel(auth.grpc_target) as channel:
            new = (await auth_pb2_grpc.AuthServiceStub(channel).CreateKey(request)).secret
        assert old.startswith("svc_test_") and new.startswith("acme_test_")
        async with httpx.AsyncClient(timeout=10) as client:
            for secret in (old, new):
                r = await client.get(
                    f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account",
                    headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"},
                )
                assert r.status_code == 200, r.text
                assert r.json()["key"]["hint"].startswith(secret[: secret.index("_test_") + 6])
    finally:
        for proc in reversed(procs):
            proc.terminate()

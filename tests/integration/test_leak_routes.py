"""GitLab-compatible token revocation (an operator-issued token, compared by its SHA-256), a rotated-out
secret reported in its overlap (it dies, its successor lives), and /v1/keys/self (any key inspects and
revokes itself, no scope needed): real authsvc and edge processes on loopback."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from google.protobuf import duration_pb2

from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="ops@partner.example")
GITLAB = "/v1/secret-scanning/gitlab"
TOKEN = "gitlab-revocation-token-0123456789abcdef"
WHERE = "https://gitlab.com/partner/app/-/blob/main/.env"


@dataclass
class Stack:
    auth_target: str
    edge: ServiceProcess

    def url(self, env: str = "live") -> str:
        return f"http://127.0.0.1:{self.edge.ports[f'{env}_port']}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("leak_routes")
    digest = tmp / "gitlab-token.sha256"
    digest.write_text(hashlib.sha256(TOKEN.encode()).hexdigest() + "\n")
    auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
    edge: ServiceProcess | None = None
    try:
        args = edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp / 'e.db'}")
        edge = ServiceProcess("edge", [*args, "--secret-scanning-gitlab-token-file", str(digest)]).start(
            tmp / "edge.log"
        )
        yield Stack(auth.grpc_target, edge)
    finally:
        if edge is not None:
            edge.terminate()
        auth.terminate()


@pytest.fixture
async def auth(stack: Stack) -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    async with grpc.aio.insecure_channel(stack.auth_target) as channel:
        yield auth_pb2_grpc.AuthServiceStub(channel)


async def new_key(
    auth: auth_pb2_grpc.AuthServiceStub,
    scopes: list[str],
    env: pb.Environment.ValueType = pb.ENVIRONMENT_LIVE,
) -> pb.CreateKeyResponse:
    account = (await auth.CreateAccount(pb.CreateAccountRequest(name="P", actor=ACTOR))).account
    created: pb.CreateKeyResponse = await auth.CreateKey(
        pb.CreateKeyRequest(account_id=account.id, environment=env, scopes=scopes, actor=ACTOR)
    )
    return created


async def account_status(client: httpx.AsyncClient, stack: Stack, secret: str) -> int:
    env, host = ("live", LIVE_HOST) if "_live_" in secret else ("sandbox", SANDBOX_HOST)
    r = await client.get(
        f"{stack.url(env)}/v1/keys/self", headers={"Host": host, "Authorization": f"Svc {secret}"}
    )
    return r.status_code


async def refused_now(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> bool:
    """Refused by the very next request: the edge that revoked a key forgets it at once."""
    r = await client.get(url, headers=headers)
    return r.status_code == 401 and r.json()["error"]["type"] == "invalid_api_key"


async def revocations(
    auth: auth_pb2_grpc.AuthServiceStub, account_id: str, key_id: str
) -> list[pb.AuditEvent]:
    resp = await auth.ListAuditEvents(
        pb.ListAuditEventsRequest(account_id=account_id, key_id=key_id, action="key.revoked", page_size=10)
    )
    return list(resp.events)


async def test_gitlab_needs_the_issued_token(stack: Stack) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        url = f"{stack.url()}{GITLAB}/revocable_token_types"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOKEN}x"}):
            r = await client.get(url, headers={"Host": LIVE_HOST, **headers})
            assert r.status_code == 401 and r.json()["error"]["type"] == "invalid_credentials"
        r = await client.get(url, headers={"Host": LIVE_HOST, "Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200
        (kind,) = r.json()["types"]
        assert kind["type"] == "svc_api_key"
        assert re.fullmatch(kind["regex"], "svc_live_" + "a" * 38)


async def test_gitlab_revokes_a_reported_key_and_a_replay_changes_nothing(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    key = await new_key(auth, ["account:read"])
    body = json.dumps([{"type": "svc_api_key", "token": key.secret, "location": WHERE}])
    headers = {"Host": LIVE_HOST, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as client:
        assert await account_status(client, stack, key.secret) == 200
        for _ in range(2):
            r = await client.post(f"{stack.url()}{GITLAB}/revoke_tokens", content=body, headers=headers)
            assert r.status_code == 204, r.text
        assert await refused_now(
            client, f"{stack.url()}/v1/keys/self", {"Host": LIVE_HOST, "Authorization": f"Svc {key.secret}"}
        )
    (audit,) = await revocations(auth, key.key.account_id, key.key.id)
    assert audit.actor.user == "secret-scanning"
    assert audit.after["reason"] == f"found in public at {WHERE} (GitLab token revocation)"
    assert key.secret not in str(audit)


async def test_a_rotated_out_secret_reported_in_its_overlap_dies_and_its_successor_lives(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    old = await new_key(auth, ["account:read"])
    rotated = await auth.RotateKey(
        pb.RotateKeyRequest(key_id=old.key.id, grace_period=duration_pb2.Duration(seconds=3600), actor=ACTOR)
    )
    body = json.dumps([{"type": "svc_api_key", "token": old.secret, "location": WHERE}])
    headers = {"Host": LIVE_HOST, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as client:
        assert await account_status(client, stack, old.secret) == 200  # in its overlap
        r = await client.post(f"{stack.url()}{GITLAB}/revoke_tokens", content=body, headers=headers)
        assert r.status_code == 204
        assert await refused_now(
            client, f"{stack.url()}/v1/keys/self", {"Host": LIVE_HOST, "Authorization": f"Svc {old.secret}"}
        )
        assert await account_status(client, stack, rotated.secret) == 200


async def test_a_key_inspects_and_revokes_itself_with_no_scope(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    key = await new_key(auth, ["hotels:read"], pb.ENVIRONMENT_SANDBOX)  # no account:* scope
    headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {key.secret}"}
    async with httpx.AsyncClient(timeout=10) as client:
        r = await client.get(f"{stack.url('sandbox')}/v1/keys/self", headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body == {
            "object": "api_key",
            "id": key.key.id,
            "environment": "sandbox",
            "livemode": False,
            "status": "active",
            "scopes": ["hotels:read"],
            "expiresAt": None,
        }
        r = await client.delete(f"{stack.url('sandbox')}/v1/keys/self", headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "revoked" and r.json()["revokedAt"]
        assert await refused_now(client, f"{stack.url('sandbox')}/v1/keys/self", headers)
    (audit,) = await revocations(auth, key.key.account_id, key.key.id)
    assert audit.actor.user == f"key:{key.key.id}"
    assert audit.after["reason"] == "revoked by itself"


async def test_the_github_route_is_the_configured_path_only(stack: Stack) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        r = await client.post(
            f"{stack.url()}/v1/secret-scanning/github", content=b"[]", headers={"Host": LIVE_HOST}
        )
        assert r.status_code == 401  # unsigned
        r = await client.get(f"{stack.url()}/v1/secret-scanning/github", headers={"Host": LIVE_HOST})
        assert r.status_code == 405


def test_the_digest_file_must_hold_a_sha256(tmp_path: Path) -> None:
    from edge.secretscanning import gitlab_digest

    bad = tmp_path / "bad"
    bad.write_text(TOKEN)
    with pytest.raises(ValueError):
        gitlab_digest(str(bad))
    assert gitlab_digest("") == ""

"""A product team in another language: a Node client of proto/ (@grpc/grpc-js with @grpc/proto-loader,
from the project's npm tools) calls Authorize over mutual TLS with a product certificate against a real
authsvc: ALLOW for a valid key, and for each other key the same deny reason the Python client gets; an
RPC that administers keys is refused to it."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
from typing import Any

import pytest

from authsvc._server import AuthServer
from authsvc.testing import ACTOR
from svckit.clients import AuthClient
from svckit.devca import files
from tests.support import ROOT, tls_of
from travel.auth.v1 import auth_pb2 as pb

NODE = shutil.which("node")
CLIENT = ROOT / "tests" / "integration" / "grpc_product_client.mjs"
pytestmark = pytest.mark.skipif(
    NODE is None or not (ROOT / "node_modules" / "@grpc" / "grpc-js").is_dir(),
    reason="no node, or the npm tools are not installed (scripts/_bootstrap.sh)",
)


async def node_authorize(authsvc: AuthServer, pki: pathlib.Path, cases: list[dict[str, Any]]) -> Any:
    assert NODE is not None
    proc = await asyncio.create_subprocess_exec(
        NODE, str(CLIENT), f"127.0.0.1:{authsvc.port}", str(ROOT / "proto"), *files(pki, "product:hotels"),
        json.dumps(cases), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_a_node_client_of_proto_authorizes_with_a_product_certificate(
    authsvc: AuthServer, pki: pathlib.Path
) -> None:
    target = f"127.0.0.1:{authsvc.port}"
    live, sandbox = pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX
    async with AuthClient(target, tls_of(pki, "svcctl")) as admin:
        account = (await admin.create_account(pb.CreateAccountRequest(name="Partner", actor=ACTOR))).account

        async def key(env: pb.Environment.ValueType, *scopes: str) -> str:
            made = await admin.create_key(
                pb.CreateKeyRequest(account_id=account.id, environment=env, scopes=list(scopes), actor=ACTOR)
            )
            return str(made.secret)

        good, narrow, test_key = (
            await key(live, "hotels:read"),
            await key(live, "esim:read"),
            await key(sandbox, "hotels:read"),
        )
        revoked = await key(live, "hotels:read")
        found = await admin.authenticate(pb.AuthenticateRequest(api_key=revoked))
        await admin.revoke_key(pb.RevokeKeyRequest(key_id=found.key.id, actor=ACTOR))
    secrets = {"valid": good, "missing scope": narrow, "sandbox key on live": test_key, "revoked": revoked,
               "unknown": good[:-6] + "AAAAAA", "malformed": "not a key"}  # fmt: skip
    cases = [
        {"api_key": s, "environment": "ENVIRONMENT_LIVE", "required_scope": "hotels:read"}
        for s in secrets.values()
    ]
    got = await node_authorize(authsvc, pki, cases)
    answers = dict(zip(secrets, got["authorize"], strict=True))
    assert got["create_key"]["code"] == "PERMISSION_DENIED", got["create_key"]

    assert answers["valid"] == {"decision": "DECISION_ALLOW", "error_type": "", "account_id": account.id}
    # Every other key is denied, with the reason the Python client of the same proto is given.
    async with AuthClient(target, tls_of(pki, "product:hotels")) as python:
        for name, secret in secrets.items():
            if name == "valid":
                continue
            expected = await python.authorize(
                pb.AuthorizeRequest(api_key=secret, environment=live, required_scope="hotels:read")
            )
            assert expected.decision == pb.DECISION_DENY and expected.error_type, name
            assert answers[name]["decision"] == "DECISION_DENY", (name, answers[name])
            assert answers[name]["error_type"] == expected.error_type, (name, answers[name])
    assert answers["missing scope"]["error_type"] == "missing_scope"
    assert answers["revoked"]["error_type"] == answers["unknown"]["error_type"] == "invalid_api_key"

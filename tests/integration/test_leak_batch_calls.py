"""A leak report costs one authsvc call per batch, whatever its size, and tokens that fail the key format
or checksum are never asked about: an edge process in front of an AuthService that counts
RevokeLeakedKeys calls (a 1,000-token batch; one of malformed tokens only)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from edge.testing import LIVE_HOST, edge_args
from svckit.apikeys import checksum
from svckit.ids import random_base62
from tests.support import ServiceProcess
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

SIGNER = ec.generate_private_key(ec.SECP256R1())


# Implements only the RPCs the edge calls here (the generated base answers the others UNIMPLEMENTED).
class CountingAuth(auth_pb2_grpc.AuthServiceServicer):
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def RevokeLeakedKeys(
        self, request: pb.RevokeLeakedKeysRequest, context: Any
    ) -> pb.RevokeLeakedKeysResponse:
        hashes_ = [t.token_hash for t in request.tokens]
        self.calls.append(hashes_)
        # The first asked is "ours".
        return pb.RevokeLeakedKeysResponse(
            keys=[pb.LeakedKey(token_hash=hashes_[0], key_id="key_x", revoked_now=False)]
        )

    async def WatchKeyChanges(self, request: pb.WatchKeyChangesRequest, context: Any) -> AsyncIterator[Any]:
        yield pb.WatchKeyChangesResponse(kind=pb.KEY_CHANGE_KIND_SYNC)
        await asyncio.Event().wait()


@pytest.fixture
async def counting() -> AsyncIterator[tuple[CountingAuth, str]]:
    servicer = CountingAuth()  # type: ignore[abstract]  # (see the class)
    server = grpc.aio.server()
    auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


@pytest.fixture
def edge_url(counting: tuple[CountingAuth, str], tmp_path: pathlib.Path) -> Iterator[str]:
    pem = SIGNER.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"public_keys": [{"key_identifier": "k1", "key": pem.decode()}]}))
    args = edge_args(counting[1], "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    edge = ServiceProcess("edge", [*args, "--secret-scanning-github-keys", str(keys)]).start(
        tmp_path / "edge.log"
    )
    try:
        yield f"http://127.0.0.1:{edge.ports['live_port']}/v1/secret-scanning/github"
    finally:
        edge.terminate()


def well_formed() -> str:
    body = "svc_live_" + random_base62(32)
    return body + checksum(body)


async def post(client: httpx.AsyncClient, url: str, tokens: list[str]) -> httpx.Response:
    body = json.dumps(
        [{"token": t, "type": "svc_api_key", "url": "u", "source": "s"} for t in tokens]
    ).encode()
    signature = base64.b64encode(SIGNER.sign(body, ec.ECDSA(hashes.SHA256()))).decode()
    headers = {
        "Host": LIVE_HOST,
        "Content-Type": "application/json",
        "GITHUB-PUBLIC-KEY-IDENTIFIER": "k1",
        "GITHUB-PUBLIC-KEY-SIGNATURE": signature,
    }
    return await client.post(url, content=body, headers=headers)


async def test_one_call_per_batch_and_none_for_malformed_tokens(
    counting: tuple[CountingAuth, str], edge_url: str
) -> None:
    auth, _ = counting
    good = [well_formed() for _ in range(500)]
    bad = [t[:-1] + ("A" if t[-1] != "A" else "B") for t in (well_formed() for _ in range(400))]
    other = [f"ghp_{random_base62(36)}" for _ in range(100)]
    async with httpx.AsyncClient(timeout=30) as client:
        r = await post(client, edge_url, good + bad + other)
        assert r.status_code == 200, r.text
        assert len(auth.calls) == 1
        assert auth.calls[0] == [hashlib.sha256(t.encode()).hexdigest() for t in good]
        labels = [f["label"] for f in r.json()]
        assert labels == ["true_positive"] + ["false_positive"] * 999
        r = await post(client, edge_url, bad + other)
        assert r.status_code == 200 and {f["label"] for f in r.json()} == {"false_positive"}
        assert len(auth.calls) == 1  # nothing worth a look-up: no call at all

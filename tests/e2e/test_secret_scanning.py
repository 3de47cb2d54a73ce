"""Leaked keys die in seconds: GitHub's secret scanning reports a signed batch to the edge (a key pair of
the test's own, its public key served from a file), real authsvc, webhookd and two edge processes.

100 tokens: 40 real keys of 2 accounts (live and test), 40 well-formed keys nobody issued, 20 with a bad
checksum. The answer labels 40 true_positive and 60 false_positive; each of the 40 keys is refused at both
edges within a second of it (the edges had them cached as valid); the accounts' people get one e-mail per
key (its hint, never the secret) and the accounts' endpoints apikey.leaked; the same batch again changes
nothing. A wrong, unknown or missing signature is 401 and revokes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import email.policy
import hashlib
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email import message_from_bytes
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from aiosmtpd.controller import Controller
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from svckit.apikeys import checksum
from svckit.ids import random_base62
from tests.support import ServiceProcess, free_port, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd.testing import Receiver

ACTOR = pb.Actor(user="ops@partner.example")
PATH = "/v1/secret-scanning/github"
KEY_ID = "test-signing-key-1"
URL = "https://github.com/partner/app/blob/abc123/settings.py"


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Any]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(
            (sorted(envelope.rcpt_tos), message_from_bytes(envelope.content, policy=email.policy.default))
        )
        return "250 OK"


@dataclass
class Stack:
    auth_target: str
    hooks_target: str
    edges: list[ServiceProcess]
    signer: ec.EllipticCurvePrivateKey
    inbox: Inbox
    receiver: Receiver

    def url(self, env: str, which: int = 0) -> str:
        return f"http://127.0.0.1:{self.edges[which].ports[f'{env}_port']}"


def _keys_file(path: Path, public: ec.EllipticCurvePublicKey) -> Path:
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    doc = {"public_keys": [{"key_identifier": KEY_ID, "key": pem.decode(), "is_current": True}]}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("leaks")
    signer = ec.generate_private_key(ec.SECP256R1())
    keys = _keys_file(tmp / "github-keys.json", signer.public_key())
    inbox = Inbox()
    smtp_port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    controller.start()
    receiver = Receiver(None).start()
    procs: list[ServiceProcess] = []
    try:
        auth_port = free_port()
        wh = start_service(
            "webhookd",
            tmp,
            sqlite_url(tmp, "w.db"),
            "--allow-private-targets",
            "--allow-http",
            "--smtp",
            f"127.0.0.1:{smtp_port}",
            "--authsvc",
            f"127.0.0.1:{auth_port}",
        )
        procs.append(wh)
        auth = start_service(
            "authsvc",
            tmp,
            sqlite_url(tmp, "a.db"),
            "--listen",
            f"127.0.0.1:{auth_port}",
            "--webhookd",
            wh.grpc_target,
        )
        procs.append(auth)
        db = f"sqlite+aiosqlite:///{tmp / 'edge.db'}"
        edges = []
        for i in (1, 2):
            e = ServiceProcess(
                "edge",
                edge_args(
                    auth.grpc_target, wh.grpc_target, db, None, "--secret-scanning-github-keys", str(keys)
                ),
            ).start(tmp / f"edge{i}.log")
            procs.append(e)
            edges.append(e)
        yield Stack(auth.grpc_target, wh.grpc_target, edges, signer, inbox, receiver)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()
        controller.stop()


def sign(signer: ec.EllipticCurvePrivateKey, body: bytes) -> dict[str, str]:
    signature = signer.sign(body, ec.ECDSA(hashes.SHA256()))
    return {
        "Host": LIVE_HOST,
        "Content-Type": "application/json",
        "GITHUB-PUBLIC-KEY-IDENTIFIER": KEY_ID,
        "GITHUB-PUBLIC-KEY-SIGNATURE": base64.b64encode(signature).decode(),
    }


def made_up_key(env: str = "live") -> str:
    body = f"svc_{env}_" + random_base62(32)
    return body + checksum(body)


def bad_checksum(secret: str) -> str:
    last = "A" if secret[-1] != "A" else "B"
    return secret[:-1] + last


async def _account(auth: auth_pb2_grpc.AuthServiceStub, name: str, owner: str) -> str:
    resp = await auth.CreateAccount(pb.CreateAccountRequest(name=name, admin_emails=[owner], actor=ACTOR))
    return str(resp.account.id)


async def _key(
    auth: auth_pb2_grpc.AuthServiceStub, account_id: str, env: pb.Environment.ValueType
) -> tuple[str, str, str]:
    resp = await auth.CreateKey(
        pb.CreateKeyRequest(account_id=account_id, environment=env, scopes=["account:read"], actor=ACTOR)
    )
    return resp.secret, resp.key.id, resp.key.hint


async def _status(client: httpx.AsyncClient, url: str, secret: str) -> int:
    host = LIVE_HOST if "_live_" in secret else SANDBOX_HOST
    r = await client.get(f"{url}/v1/account", headers={"Host": host, "Authorization": f"Svc {secret}"})
    return r.status_code


async def _statuses(stack: Stack, client: httpx.AsyncClient, secrets: list[str]) -> list[int]:
    calls = []
    for secret in secrets:
        env = "live" if "_live_" in secret else "sandbox"
        for which in (0, 1):
            calls.append(_status(client, stack.url(env, which), secret))
    return list(await asyncio.gather(*calls))


async def _audit_count(auth: auth_pb2_grpc.AuthServiceStub, account_id: str) -> int:
    resp = await auth.ListAuditEvents(
        pb.ListAuditEventsRequest(account_id=account_id, action="key.revoked", page_size=100)
    )
    return len(resp.events)


async def test_a_signed_batch_revokes_our_keys_at_every_edge(stack: Stack) -> None:
    async with (
        grpc.aio.insecure_channel(stack.auth_target) as ac,
        grpc.aio.insecure_channel(stack.hooks_target) as wc,
        httpx.AsyncClient(timeout=30) as client,
    ):
        auth = auth_pb2_grpc.AuthServiceStub(ac)
        hooks = webhooks_pb2_grpc.WebhookServiceStub(wc)
        owners = ["owner-a@partner.example", "owner-b@partner.example"]
        accounts = [await _account(auth, f"Partner {i}", owner) for i, owner in enumerate(owners)]
        real: list[tuple[str, str, str, str]] = []  # secret, key id, hint, account
        for account_id in accounts:
            for hooks_env in (wpb.ENVIRONMENT_LIVE, wpb.ENVIRONMENT_SANDBOX):
                await hooks.RegisterEndpoint(
                    wpb.RegisterEndpointRequest(
                        account_id=account_id,
                        environment=hooks_env,
                        url=stack.receiver.url(f"/{account_id}/{hooks_env}"),
                        events=["apikey.leaked"],
                    )
                )
            for i in range(20):
                env = pb.ENVIRONMENT_LIVE if i % 2 == 0 else pb.ENVIRONMENT_SANDBOX
                real.append((*await _key(auth, account_id, env), account_id))
        secrets = [r[0] for r in real]
        # Every key works at both edges first (and is cached there as valid).
        assert set(await _statuses(stack, client, secrets)) == {200}

        unknown = [made_up_key("live" if i % 2 else "test") for i in range(40)]
        broken = [bad_checksum(s) for s in secrets[:10]] + [bad_checksum(s) for s in unknown[:10]]
        tokens = secrets + unknown + broken
        random.shuffle(tokens)
        batch = [{"token": t, "type": "svc_api_key", "url": URL, "source": "content"} for t in tokens]
        body = json.dumps(batch).encode()

        r = await client.post(f"{stack.url('live')}{PATH}", content=body, headers=sign(stack.signer, body))
        answered = time.monotonic()
        assert r.status_code == 200, r.text
        feedback = r.json()
        assert [f["token_hash"] for f in feedback] == [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
        labels = {f["token_hash"]: f["label"] for f in feedback}
        real_hashes = {hashlib.sha256(s.encode()).hexdigest() for s in secrets}
        assert {h for h, label in labels.items() if label == "true_positive"} == real_hashes
        assert sum(label == "false_positive" for label in labels.values()) == 60
        assert all(f["token_type"] == "svc_api_key" for f in feedback)

        # Refused at both edges within a second of the answer (revocation reaches every edge's cache).
        while set(statuses := await _statuses(stack, client, secrets)) != {401}:
            assert time.monotonic() - answered < 1.0, f"{statuses.count(200)} answers still 200"
        # The account's people: one e-mail per key, naming its hint and where it was found, never the secret.
        for _ in range(1500):
            if len(stack.inbox.messages) >= 40:
                break
            await asyncio.sleep(0.02)
        mails = list(stack.inbox.messages)
        assert len(mails) == 40
        for secret, key_id, hint, account_id in real:
            mine = [m for to, m in mails if key_id in m.get_content()]
            assert len(mine) == 1, key_id
            text = mine[0].get_content()
            assert hint in mine[0]["Subject"] and URL in text and secret not in text
            assert mine[0]["To"] == owners[accounts.index(account_id)]
        # apikey.leaked at each account's endpoint of the key's environment.
        received = await stack.receiver.wait_for(40, within=30)
        leaked = [json.loads(x.body) for x in received if json.loads(x.body)["type"] == "apikey.leaked"]
        assert sorted(e["data"]["keyId"] for e in leaked) == sorted(r[1] for r in real)
        assert all(e["data"]["url"] == URL for e in leaked)
        audits = [await _audit_count(auth, a) for a in accounts]
        assert audits == [20, 20]
        reason = (await auth.GetKey(pb.GetKeyRequest(key_id=real[0][1]))).key
        assert reason.status == pb.KEY_STATUS_REVOKED

        # The same batch again: the same answer, nothing new revoked, audited, e-mailed or delivered.
        again = await client.post(
            f"{stack.url('live', 1)}{PATH}", content=body, headers=sign(stack.signer, body)
        )
        assert again.status_code == 200 and again.json() == feedback
        await asyncio.sleep(2.0)  # what a second revocation would have sent by now (outbox polls each second)
        assert len(stack.inbox.messages) == 40
        assert stack.receiver.count == len(received)
        assert [await _audit_count(auth, a) for a in accounts] == audits


async def test_a_bad_signature_is_refused_and_revokes_nothing(stack: Stack) -> None:
    async with (
        grpc.aio.insecure_channel(stack.auth_target) as ac,
        httpx.AsyncClient(timeout=30) as client,
    ):
        auth = auth_pb2_grpc.AuthServiceStub(ac)
        account_id = await _account(auth, "Partner C", "owner-c@partner.example")
        secret, _key_id, _hint = await _key(auth, account_id, pb.ENVIRONMENT_LIVE)
        body = json.dumps(
            [{"token": secret, "type": "svc_api_key", "url": URL, "source": "content"}]
        ).encode()
        good = sign(stack.signer, body)
        other = sign(ec.generate_private_key(ec.SECP256R1()), body)
        unknown = {**good, "GITHUB-PUBLIC-KEY-IDENTIFIER": "no-such-key"}
        missing = {k: v for k, v in good.items() if k != "GITHUB-PUBLIC-KEY-SIGNATURE"}
        changed = body.replace(b"content", b"commits")
        for headers, content in ((other, body), (unknown, body), (missing, body), (good, changed)):
            r = await client.post(f"{stack.url('live')}{PATH}", content=content, headers=headers)
            assert r.status_code == 401, r.text
            assert r.json()["error"]["type"] == "invalid_credentials"
        assert await _status(client, stack.url("live"), secret) == 200
        assert await _audit_count(auth, account_id) == 0
        # On the sandbox host the route does not exist.
        r = await client.post(
            f"{stack.url('sandbox')}{PATH}", content=body, headers={**good, "Host": SANDBOX_HOST}
        )
        assert r.status_code == 404
        # Too many tokens: 413, nothing revoked.
        big = json.dumps([{"token": secret}] * 1001).encode()
        r = await client.post(f"{stack.url('live')}{PATH}", content=big, headers=sign(stack.signer, big))
        assert r.status_code == 413
        assert await _status(client, stack.url("live"), secret) == 200

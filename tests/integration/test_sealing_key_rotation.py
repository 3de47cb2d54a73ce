"""Sealing-key rotation on SQLite and PostgreSQL (db_url), for webhookd's signing secrets and authsvc's
TOTP seeds: values sealed with key A, a restart with [B, A] opens them all, `python -m <service> reseal`
(the real command) moves every row under B and says so, a restart with B alone opens everything, and
A alone no longer does. No key or secret appears in the command's output."""

from __future__ import annotations

import datetime as dt
import pathlib
import subprocess
import sys

import grpc
import pyotp
import pytest
import sqlalchemy as sa

from authsvc._server import SEALED_COLUMNS
from authsvc._sql_tables import users
from authsvc.testing import ACTOR, new_account, running_authsvc
from svckit.clock import FakeClock
from svckit.reseal import OLD_KEY_ROWS, count
from svckit.secretbox import SecretBox as PlainBox
from svckit.secretbox import key_id, new_key, parse_key
from svckit.webhook_status import EndpointStatus
from travel.auth.v1 import identity_pb2 as pb
from travel.auth.v1 import identity_pb2_grpc
from webhookd._errors import SecretsKeyError
from webhookd._receiver_auth import OAuth2Credentials, ReceiverAuth
from webhookd._repository import EndpointRecord, SigningSecret
from webhookd._secretbox import SecretBox
from webhookd._sql import SEALED_SECRETS, SqlRepository, endpoints

ROOT = pathlib.Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.UTC)
ACCT = "acct_rotation"
PASSWORD = "correct horse battery staple"


def _keys(tmp_path: pathlib.Path) -> tuple[str, str, pathlib.Path, pathlib.Path]:
    texts = new_key(), new_key()
    paths = tmp_path / "a.key", tmp_path / "b.key"
    for text, path in zip(texts, paths, strict=True):
        path.write_text(text + "\n")
    return texts[0], texts[1], paths[0], paths[1]


def _reseal(service: str, database: str, *key_files: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", service, "reseal", "--database", database,
         "--secrets-key-file", ",".join(str(p) for p in key_files), "--batch-size", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _endpoint(n: int) -> EndpointRecord:
    secret = SigningSecret(f"whsec_{n:02d}" + "R" * 42)
    # The receiver's OAuth2 client secret: sealed in its own column, re-sealed with the signing secrets.
    creds = OAuth2Credentials("https://login.partner.test/token", "cid", _client_secret(n))
    return EndpointRecord(f"we_rot{n}", ACCT, "live", "https://hooks.partner.test/h", ["booking.confirmed"],
                          "", EndpointStatus.ENABLED, "", T0, T0, [secret],
                          receiver_auth=ReceiverAuth(f"we_rot{n}", oauth2=creds))  # fmt: skip


def _client_secret(n: int) -> str:
    return f"cs_rotation_{n:02d}_" + "K" * 20


async def _open_all(repo: SqlRepository, n: int) -> list[str]:
    got = []
    for i in range(n):
        ep = await repo.get_endpoint(ACCT, "live", f"we_rot{i}")
        assert ep is not None and ep.receiver_auth is not None and ep.receiver_auth.oauth2 is not None
        assert ep.receiver_auth.oauth2.client_secret == _client_secret(i)
        got.append(ep.secrets[0].secret)
    return got


async def _stored(repo: SqlRepository) -> list[str]:
    async with repo.engine.connect() as conn:
        rows = await conn.execute(sa.select(endpoints.c.secrets, endpoints.c.receiver_secrets))
        return [str(v) for r in rows for v in r]


async def test_webhookd_rotation_with_two_keys_then_reseal(db_url: str, tmp_path: pathlib.Path) -> None:
    a_text, b_text, a_file, b_file = _keys(tmp_path)
    a, b = parse_key(a_text), parse_key(b_text)
    expected = [f"whsec_{n:02d}" + "R" * 42 for n in range(5)]
    repo = await SqlRepository.open(db_url, SecretBox(a))
    try:
        for n in range(4):
            await repo.create_endpoint(_endpoint(n))
        # One row as a release before keyrings sealed it: enc1, no key id.
        async with repo.engine.begin() as conn:
            old = PlainBox(a).seal('[{"s": "' + expected[3] + '", "exp": null}]', "we_rot3")
            await conn.execute(endpoints.update().where(endpoints.c.id == "we_rot3").values(secrets=old))
    finally:
        await repo.close()

    # The switch: every process restarted with [B, A]. Everything opens; new values are sealed under B.
    repo = await SqlRepository.open(db_url, SecretBox([b, a]))
    try:
        await repo.seal_secrets()  # the start's check passes
        await repo.create_endpoint(_endpoint(4))
        assert await _open_all(repo, 5) == expected
        assert await count(repo.engine, repo.box, SEALED_SECRETS) == (4, 0)  # the gauge's query
    finally:
        await repo.close()

    done = _reseal("webhookd", db_url, b_file, a_file)
    assert done.returncode == 0, done.stderr
    assert f"4 resealed under key {key_id(b)}" in done.stdout and "0 not under the newest key" in done.stdout
    assert f"wh_endpoints.receiver_secrets: 4 resealed under key {key_id(b)}" in done.stdout
    for text in (a_text, b_text, "whsec_", "cs_rotation"):
        assert text.strip() not in done.stdout + done.stderr
    again = _reseal("webhookd", db_url, b_file, a_file)  # idempotent
    assert again.returncode == 0 and "0 resealed" in again.stdout

    # The old key retired: B alone opens everything; A alone no longer starts.
    repo = await SqlRepository.open(db_url, SecretBox(b))
    try:
        await repo.seal_secrets()
        assert await _open_all(repo, 5) == expected
        assert all(s.startswith(f"enc2:{key_id(b)}:") for s in await _stored(repo))
        assert await count(repo.engine, repo.box, SEALED_SECRETS) == (0, 0)
    finally:
        await repo.close()
    stale = await SqlRepository.open(db_url, SecretBox(a))
    try:
        with pytest.raises(SecretsKeyError) as err:
            await stale.seal_secrets()
        assert a_text.strip() not in err.value.message
    finally:
        await stale.close()
    # Without the old key the command says what did not open and fails (nothing left under A here).
    missing = _reseal("webhookd", db_url, a_file)
    assert missing.returncode == 1 and "5 do not open with these keys" in missing.stdout


async def test_authsvc_totp_seeds_survive_a_rotation(db_url: str, tmp_path: pathlib.Path) -> None:
    a_text, b_text, a_file, b_file = _keys(tmp_path)
    a, b = parse_key(a_text), parse_key(b_text)
    clock = FakeClock(dt.datetime.now(dt.UTC))

    async def sign_in(ids: identity_pb2_grpc.IdentityServiceStub, totp: pyotp.TOTP) -> None:
        clock.advance(30)  # a code works once: the next step's
        await ids.SignIn(
            pb.SignInRequest(email="owner@partner.example", password=PASSWORD, totp_code=totp.at(clock.now()))
        )

    async with running_authsvc(db_url, clock=clock, secrets_key=a) as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            invite = await ids.CreateInvite(
                pb.CreateInviteRequest(
                    account_id=account.id, email="owner@partner.example", role=pb.USER_ROLE_OWNER, actor=ACTOR
                )
            )
            accepted = await ids.AcceptInvite(pb.AcceptInviteRequest(token=invite.token, password=PASSWORD))
            session = accepted.session_token
            begun = await ids.BeginTotpEnrollment(pb.BeginTotpEnrollmentRequest(session_token=session))
            totp = pyotp.TOTP(pyotp.parse_uri(begun.provisioning_uri).secret)
            clock.advance(30)
            await ids.ConfirmTotpEnrollment(
                pb.ConfirmTotpEnrollmentRequest(session_token=session, code=totp.at(clock.now()))
            )
            await sign_in(ids, totp)

    async with running_authsvc(db_url, clock=clock, secrets_key=[b, a]) as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            await sign_in(identity_pb2_grpc.IdentityServiceStub(channel), totp)
        assert server.sealed_rows is not None
        found = await server.sealed_rows.refresh()
        assert found["auth_portal_users.totp_seed"] == (1, 0)
        assert OLD_KEY_ROWS.labels("auth_portal_users.totp_seed")._value.get() == 1

    done = _reseal("authsvc", db_url, b_file, a_file)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(SEALED_COLUMNS)
    assert f"auth_portal_users.totp_seed: 1 resealed under key {key_id(b)}" in lines[0]
    assert "0 not under the newest key" in lines[0] and "0 resealed" in lines[1]
    assert a_text.strip() not in done.stdout + done.stderr and b_text.strip() not in done.stdout + done.stderr

    async with running_authsvc(db_url, clock=clock, secrets_key=[b]) as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            await sign_in(identity_pb2_grpc.IdentityServiceStub(channel), totp)
        async with server.repo.engine.connect() as conn:
            seeds = [r[0] for r in await conn.execute(sa.select(users.c.totp_seed))]
        assert [s[:14] for s in seeds] == [f"enc2:{key_id(b)}:"]
        assert server.sealed_rows is not None
        assert (await server.sealed_rows.refresh())["auth_portal_users.totp_seed"] == (0, 0)

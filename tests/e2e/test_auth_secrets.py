"""No plaintext secret ever reaches a log line, an error message or the audit trail.

A full key lifecycle runs over gRPC with logging at DEBUG, once against a real process (its stderr
is scanned) and once in-process (every LogRecord's message, arguments and extra fields are scanned
before any formatter or redaction could hide a leak).
"""

from __future__ import annotations

import logging
import pathlib

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, json_format

from authsvc.testing import running_authsvc
from svckit.errors import type_from_rpc_error
from tests.support import ServiceProcess
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="alice@partner.example", source_address="2001:db8::7")


async def lifecycle(stub: auth_pb2_grpc.AuthServiceStub) -> tuple[list[str], list[str]]:
    """Every key operation; returns (secrets issued, texts the service sent back other than secrets)."""
    secrets: list[str] = []
    texts: list[str] = []

    async def expect_error(call: object) -> None:
        try:
            await call  # type: ignore[misc]
        except grpc.aio.AioRpcError as exc:
            texts.append(str(type_from_rpc_error(exc)))
            texts.append(str(exc.details()))
            return
        raise AssertionError("expected an error")

    account = (
        await stub.CreateAccount(
            pb.CreateAccountRequest(name="Leak Test", actor=ACTOR, daily_search_allowance=3)
        )
    ).account
    live = await stub.CreateKey(
        pb.CreateKeyRequest(
            account_id=account.id,
            environment=pb.ENVIRONMENT_LIVE,
            name="checkout",
            scopes=["hotels:read"],
            allowed_sources=["192.0.2.0/24"],
            actor=ACTOR,
        )
    )
    test = await stub.CreateKey(
        pb.CreateKeyRequest(
            account_id=account.id,
            environment=pb.ENVIRONMENT_SANDBOX,
            name="ci",
            scopes=["esim:write"],
            actor=ACTOR,
        )
    )
    secrets += [live.secret, test.secret]
    for secret in (live.secret, test.secret):
        await stub.Authenticate(pb.AuthenticateRequest(api_key=secret))
        for env in (pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX):
            for scope, source, write in [
                ("hotels:read", "192.0.2.5", False),
                ("esim:write", "10.0.0.1", True),
            ]:
                r = await stub.Authorize(
                    pb.AuthorizeRequest(
                        api_key=secret,
                        environment=env,
                        required_scope=scope,
                        source_address=source,
                        is_write=write,
                    )
                )
                texts += [r.error_type, r.error_message, json_format.MessageToJson(r)]
    typo = live.secret[:-3] + ("aaa" if live.secret[-3:] != "aaa" else "bbb")
    r = await stub.Authorize(pb.AuthorizeRequest(api_key=typo, environment=pb.ENVIRONMENT_LIVE))
    texts.append(r.error_message)
    await expect_error(stub.Authenticate(pb.AuthenticateRequest(api_key=typo)))
    await stub.UpdateKey(
        pb.UpdateKeyRequest(
            key_id=live.key.id,
            update_mask=field_mask_pb2.FieldMask(paths=["scopes", "name"]),
            name="renamed",
            scopes=["hotels:read", "flights:read"],
            actor=ACTOR,
        )
    )
    await expect_error(
        stub.UpdateKey(
            pb.UpdateKeyRequest(
                key_id=live.key.id,
                update_mask=field_mask_pb2.FieldMask(paths=["scopes"]),
                scopes=[live.secret],
                actor=ACTOR,
            )
        )
    )
    rotated = await stub.RotateKey(
        pb.RotateKeyRequest(key_id=live.key.id, grace_period=duration_pb2.Duration(seconds=60), actor=ACTOR)
    )
    secrets.append(rotated.secret)
    await stub.Authorize(
        pb.AuthorizeRequest(
            api_key=rotated.secret,
            environment=pb.ENVIRONMENT_LIVE,
            required_scope="flights:read",
            source_address="192.0.2.9",
        )
    )
    await stub.ConsumeSearch(
        pb.ConsumeSearchRequest(account_id=account.id, key_id=rotated.new_key.id, count=3)
    )
    await expect_error(
        stub.ConsumeSearch(pb.ConsumeSearchRequest(account_id=account.id, key_id=rotated.new_key.id))
    )
    for key_id in (rotated.new_key.id, test.key.id):
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key_id, reason="lifecycle test", actor=ACTOR))
    for secret in (rotated.secret, test.secret):
        await expect_error(stub.Authenticate(pb.AuthenticateRequest(api_key=secret)))
    for secret in secrets:
        r = await stub.Authorize(pb.AuthorizeRequest(api_key=secret, environment=pb.ENVIRONMENT_LIVE))
        texts.append(json_format.MessageToJson(r))
    for name in (live.secret * 5, f"copy of {live.secret}"):
        create = pb.CreateKeyRequest(
            account_id=account.id,
            environment=pb.ENVIRONMENT_LIVE,
            name=name,
            scopes=["hotels:read"],
            actor=ACTOR,
        )
        await expect_error(stub.CreateKey(create))
    await expect_error(
        stub.RevokeKey(pb.RevokeKeyRequest(key_id=live.key.id, reason=live.secret, actor=ACTOR))
    )
    bad_allow = pb.CreateKeyRequest(
        account_id=account.id,
        environment=pb.ENVIRONMENT_LIVE,
        scopes=["hotels:read"],
        allowed_sources=[live.secret],
        actor=ACTOR,
    )
    await expect_error(stub.CreateKey(bad_allow))
    await expect_error(
        stub.Authorize(
            pb.AuthorizeRequest(
                api_key=live.secret, environment=pb.ENVIRONMENT_LIVE, required_scope=live.secret
            )
        )
    )
    keys = await stub.ListKeys(pb.ListKeysRequest(account_id=account.id, include_revoked=True))
    texts.append(json_format.MessageToJson(keys))
    audit = await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id, page_size=200))
    assert len(audit.events) >= 7
    texts.append(json_format.MessageToJson(audit))
    for key_id in (live.key.id, test.key.id, rotated.new_key.id):
        texts.append(json_format.MessageToJson(await stub.GetKey(pb.GetKeyRequest(key_id=key_id))))
    return secrets, texts


def assert_no_secret(secrets: list[str], haystacks: list[str]) -> None:
    assert len(secrets) == 3
    for secret in secrets:
        body = secret[len("svc_live_") :]
        for text in haystacks:
            assert secret not in text and body not in text, "a secret leaked"
            assert body[:16] not in text and body[-16:] not in text, "part of a secret leaked"


async def test_no_secret_in_process_logs_errors_or_audit(tmp_path: pathlib.Path) -> None:
    proc = ServiceProcess(
        "authsvc",
        [
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "",
            "--log-level",
            "DEBUG",
            "--database",
            f"sqlite+aiosqlite:///{tmp_path / 'a.db'}",
        ],
    ).start(tmp_path / "authsvc.log")
    try:
        async with grpc.aio.insecure_channel(proc.grpc_target) as channel:
            secrets, texts = await lifecycle(auth_pb2_grpc.AuthServiceStub(channel))
    finally:
        proc.terminate()
    logs = proc.logs()
    assert '"level": "debug"' in logs and "key revoked" in logs  # logging really ran at DEBUG
    assert_no_secret(secrets, [logs, *texts])


async def test_no_secret_in_log_records(sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("sqlalchemy.engine", "aiosqlite", "grpc", "authsvc"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        async with running_authsvc(sqlite_url, last_used_interval=0.05) as (_server, stub):
            secrets, texts = await lifecycle(stub)
    finally:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
        logging.getLogger("aiosqlite").setLevel(logging.WARNING)
    records = caplog.records
    assert any(r.name.startswith("sqlalchemy.engine") for r in records)  # SQL and its parameters were logged
    assert any(r.getMessage() == "key rotated" for r in records)
    dumped = []
    for r in records:
        dumped.append(r.getMessage())
        dumped.append(repr(r.args))
        dumped.append(repr({k: v for k, v in vars(r).items() if k not in ("args", "msg")}))
        dumped.append(str(r.exc_text or ""))
    assert_no_secret(secrets, dumped + texts)

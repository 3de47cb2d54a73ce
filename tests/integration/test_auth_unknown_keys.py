"""Made-up API keys (right prefix, valid checksum) against a real authsvc over gRPC on loopback: on
SQLite they are answered invalid_api_key without a database read (authsvc._known_keys), while a key is
known the moment CreateKey or RotateKey returns, even amid a flood of made-up ones, and after a restart;
on PostgreSQL, where other processes add keys, every key is still read."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from authsvc._server import AuthServer
from authsvc.testing import ACTOR, new_account, new_key, running_authsvc
from svckit.apikeys import checksum
from svckit.ids import random_base62
from tests.integration.auth_requests import authz
from travel.auth.v1 import auth_pb2 as pb


def made_up() -> str:
    body = "svc_live_" + random_base62(32)
    return body + checksum(body)


def count_reads(server: AuthServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hashes the server reads keys by from now on (one entry per database look-up)."""
    reads: list[str] = []
    read: Callable[[str], Awaitable[Any]] = server.repo.grant_by_hash

    async def counted(secret_hash: str) -> Any:
        reads.append(secret_hash)
        return await read(secret_hash)

    monkeypatch.setattr(server.repo, "grant_by_hash", counted)
    return reads


async def test_made_up_keys_are_refused_without_a_database_read(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        account = await new_account(stub)
        real = (await new_key(stub, account.id)).secret
        reads = count_reads(server, monkeypatch)
        for _ in range(30):
            got = await stub.Authorize(authz(made_up()))
            assert (got.decision, got.error_type) == (pb.DECISION_DENY, "invalid_api_key")
            assert not got.HasField("key")
        assert reads == []
        assert (await stub.Authorize(authz(real))).decision == pb.DECISION_ALLOW
        assert len(reads) == 1  # a real key is read as before


async def test_a_new_key_is_known_the_moment_it_is_returned_amid_a_flood(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (_, stub):
        account = await new_account(stub)
        stop = asyncio.Event()
        refused = 0

        async def flood() -> None:
            nonlocal refused
            while not stop.is_set():
                got = await stub.Authorize(authz(made_up()))
                refused += got.error_type == "invalid_api_key"

        floods = [asyncio.create_task(flood()) for _ in range(8)]
        try:
            for _ in range(15):
                created = await new_key(stub, account.id)
                assert (await stub.Authorize(authz(created.secret))).decision == pb.DECISION_ALLOW
                rotated = await stub.RotateKey(pb.RotateKeyRequest(key_id=created.key.id, actor=ACTOR))
                for secret in (rotated.secret, created.secret):  # both, through the grace period
                    assert (await stub.Authorize(authz(secret))).decision == pb.DECISION_ALLOW
        finally:
            stop.set()
            await asyncio.gather(*floods)
        assert refused > 0
        # A revoked key is still read and told apart from one that never existed.
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=rotated.new_key.id, actor=ACTOR))
        gone = await stub.Authorize(authz(rotated.secret))
        assert gone.decision == pb.DECISION_DENY and gone.key.id == rotated.new_key.id


async def test_keys_stored_before_a_restart_are_known_after_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    async with running_authsvc(url) as (_, stub):
        secret = (await new_key(stub, (await new_account(stub)).id)).secret
    async with running_authsvc(url) as (server, stub):
        reads = count_reads(server, monkeypatch)
        assert (await stub.Authorize(authz(secret))).decision == pb.DECISION_ALLOW
        assert (await stub.Authorize(authz(made_up()))).error_type == "invalid_api_key"
        assert len(reads) == 1


async def test_on_postgresql_every_unknown_key_is_read(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process may have just made the key: only its notification would tell this one, maybe
    after the key's first use, so nothing is proven unknown here."""
    async with running_authsvc(pg_url) as (server, stub):
        reads = count_reads(server, monkeypatch)
        for _ in range(3):
            assert (await stub.Authorize(authz(made_up()))).error_type == "invalid_api_key"
        assert len(reads) == 3


async def test_two_processes_on_one_sqlite_file_know_each_others_keys(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not how SQLite is deployed (one process per service), but tests and drills do it: a key made by
    either is allowed by the other, at once, and stays so after the other stops."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    async with running_authsvc(url) as (first, a):
        account = await new_account(a)
        before = (await new_key(a, account.id)).secret
        async with running_authsvc(url) as (_, b):
            on_b = (await new_key(b, account.id)).secret
            on_a = (await new_key(a, account.id)).secret
            for stub in (a, b):
                for secret in (before, on_a, on_b):
                    assert (await stub.Authorize(authz(secret))).decision == pb.DECISION_ALLOW
        assert (await a.Authorize(authz(on_b))).decision == pb.DECISION_ALLOW
        reads = count_reads(first, monkeypatch)
        assert (await a.Authorize(authz(made_up()))).error_type == "invalid_api_key"
        assert len(reads) == 1  # the first one no longer proves anything unknown

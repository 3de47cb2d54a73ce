"""What the drill stands its stack on: a database of its own (or a schema of the given one), a Redis of
its own
(never the machine's shared one when it stops it), and the previous release's code for a mixed roll."""

from __future__ import annotations

import asyncio
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.parse

import asyncpg
import redis.asyncio as aioredis

from tests.e2e.test_rolling_upgrade import PREVIOUS_RELEASE  # the one place that names that release
from tests.support import ROOT, free_port


class Database:
    """A database the drill creates (``own``) and drops, or a schema of the given URL's database. The
    administrator's URL is the flag's; the services get ``url``."""

    def __init__(self, admin_url: str, tag: str, own: bool) -> None:
        parts = urllib.parse.urlsplit(admin_url.replace("+asyncpg", ""))
        if parts.scheme not in ("postgres", "postgresql"):
            raise SystemExit(f"--database: a postgresql:// URL, not {admin_url!r}")
        self.admin = parts._replace(scheme="postgresql", query="").geturl()
        self.given = parts.path.lstrip("/") or "postgres"
        self.own = own
        self.name = tag if own else self.given
        self.schema = "public" if own else tag
        target = parts._replace(scheme="postgresql+asyncpg", path=f"/{self.name}", query="")
        self.url = target.geturl() + ("" if own else f"?search_path={tag}")

    async def _run(self, *statements: str) -> None:
        conn = await asyncpg.connect(self.admin, timeout=10)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    async def create(self) -> None:
        await self._run(f'CREATE DATABASE "{self.name}"' if self.own else f'CREATE SCHEMA "{self.schema}"')

    async def drop(self) -> None:
        if self.own:
            await self.allow()
            await self._run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        else:
            await self._run(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    async def refuse(self) -> None:
        """No new connection, and the ones the services hold ended (as a failover or a restart does)."""
        await self._run(
            f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false',
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.name}' AND pid <> pg_backend_pid()",
        )

    async def allow(self) -> None:
        await self._run(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')


class OwnRedis:
    """A redis-server of the drill's own on one port (no persistence), stopped and started by the redis
    phase; None from ``start_if_installed`` when redis-server is not installed."""

    def __init__(self, port: int, work: pathlib.Path) -> None:
        self.port = port
        self.log = work / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def start_if_installed(cls, port: int, work: pathlib.Path) -> OwnRedis | None:
        if shutil.which("redis-server") is None:
            return None
        r = cls(port, work)
        r.start()
        return r

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                import socket

                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not listen on {self.port}: {self.log.read_text()[-500:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


async def forget_redis(url: str, prefix: str) -> int:
    client = aioredis.from_url(url)
    try:
        names = [name async for name in client.scan_iter(match=f"{prefix}*", count=500)]
        if names:
            await client.delete(*names)
        return len(names)
    finally:
        await client.aclose()


def previous_release(into: pathlib.Path) -> pathlib.Path:
    """The previous release's code (``git archive`` of its commit) with its own gRPC stubs generated, as
    tests/e2e/test_rolling_upgrade.py runs it."""
    archive = subprocess.run(
        ["git", "archive", PREVIOUS_RELEASE, "svckit", "webhookd", "proto", "scripts/gen_protos.py"],
        cwd=ROOT,
        capture_output=True,
    )
    if archive.returncode != 0:
        raise SystemExit(f"the previous release {PREVIOUS_RELEASE[:12]} is not in this clone's history")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    bindir = str(pathlib.Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run(
        [sys.executable, "scripts/gen_protos.py"], cwd=into, env=env, check=True, capture_output=True
    )
    return into


async def migrate_webhookd(database_url: str) -> str:
    """This release's ``webhookd migrate`` (the roll's first step); its one line of output."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhookd", "migrate", "--database", database_url,
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"webhookd migrate failed: {out.decode()[-1000:]}")
    return out.decode().strip().splitlines()[-1]


class Ports:
    """Consecutive ports from ``base`` (the operator's range), or free ones when ``base`` is 0."""

    def __init__(self, base: int) -> None:
        self.next = base

    def take(self) -> int:
        if not self.next:
            return int(free_port())
        self.next += 1
        return self.next - 1

    def take_run(self, n: int) -> int:
        """The first of ``n`` consecutive ports (edge.workers puts worker i on the metrics port + i)."""
        if self.next:
            first = self.next
            self.next += n
            return first
        for _ in range(100):
            first = int(free_port())
            if all(_free(first + i) for i in range(1, n)):
                return first
        raise RuntimeError(f"no {n} consecutive free ports found")


def _free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

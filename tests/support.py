"""Helpers for tests that start real service processes."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pathlib
import random
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import websockets
from google.protobuf import struct_pb2

from svckit.devca import files, flags
from svckit.tls import Tls

ROOT = pathlib.Path(__file__).resolve().parent.parent
REDIS_URL = "redis://127.0.0.1:6379/0"


class ServiceProcess:
    """A service started as ``python -m <module> serve ...``; ``ports`` is its READY line.

    Its gRPC is plaintext (``--insecure-dev``) unless ``tls`` gives its TLS flags (``tls_args``)."""

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        env: dict[str, str] | None = None,
        tls: Sequence[str] | None = None,
        cwd: pathlib.Path | None = None,
    ) -> None:
        self.module = module
        self.cwd = cwd or ROOT  # another release's checkout: its code first (with PYTHONPATH in env)
        self.args = [*args, *(tls if tls is not None else ["--insecure-dev"])]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.ports: dict[str, Any] = {}
        self.log_path: pathlib.Path | None = None

    def start(self, log_path: pathlib.Path, timeout: float = 30.0) -> ServiceProcess:
        self.log_path = log_path
        log_file = open(log_path, "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, "serve", *self.args],
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            cwd=self.cwd,
            env=self.env,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("READY "):
                    self.ports = json.loads(line[len("READY ") :])
                    return self
                if line == "" and self.proc.poll() is not None:
                    break
            elif self.proc.poll() is not None:
                break
        self.kill()
        raise RuntimeError(f"{self.module} did not start; log:\n{log_path.read_text()[-4000:]}")

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.ports['grpc_port']}"

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def logs(self) -> str:
        return self.log_path.read_text() if self.log_path else ""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a process that must come back on the same port).

    Chosen below the kernel's ephemeral range: a port the kernel handed out for port 0 and took back
    can go, a moment later, to another test's listener or to any outgoing connection, and the process
    that starts on it then fails with "address already in use" (CI saw it). Below that range only
    another explicit choice can collide, and a random one of ~20,000 rarely does."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(_LOWEST_PICKED, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port found in {_LOWEST_PICKED}-{low - 1}")


_LOWEST_PICKED = 10000


def _ephemeral_low() -> int:
    try:
        low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, _LOWEST_PICKED + 1000)


async def close_code(stream: Any, frame_timeout: float) -> int | None:
    """Receive from a WebSocket until the server closes it (each frame within ``frame_timeout``): the close
    code the server sent, None if it sent no close frame."""
    try:
        while True:
            await asyncio.wait_for(stream.recv(), frame_timeout)
    except websockets.ConnectionClosed as closed:
        return None if closed.rcvd is None else closed.rcvd.code


def scraped(metrics_port: int, sample: str) -> float:
    """The sum of the samples of a process's /metrics whose line starts with ``sample`` (a name and
    possibly the start of its labels), 0 when there is none."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(sample))


def sqlite_url(directory: pathlib.Path, name: str) -> str:
    return f"sqlite+aiosqlite:///{directory / name}"


def start_service(
    module: str, log_dir: pathlib.Path, database: str, *extra: str, tls: Sequence[str] | None = None
) -> ServiceProcess:
    """``module`` serving gRPC on a free port, no metrics listener, on ``database``; logs to
    ``log_dir/<module>.log``."""
    args = ["--listen", "127.0.0.1:0", "--metrics-listen", "", "--database", database, *extra]
    return ServiceProcess(module, args, tls=tls).start(log_dir / f"{module}.log")


def tls_of(pki: pathlib.Path, identity: str) -> Tls:
    """Mutual TLS as ``identity``, for in-process servers and clients (the ``pki`` fixture)."""
    return Tls.from_files(*files(pki, identity))


def tls_args(pki: pathlib.Path, identity: str) -> list[str]:
    """The TLS flags of a process (or svcctl) holding ``identity``'s certificate."""
    return flags(pki, identity)


_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


def csrf_of(page: str) -> str:
    """The CSRF token of a portal page's form."""
    found = _CSRF.search(page)
    assert found, "no CSRF field on the page"
    return found.group(1)


def event_data(kind: str, **fields: Any) -> struct_pb2.Struct:
    """A valid ``data`` of ``kind`` (the catalog's example: webhookd refuses any other, svckit.eventcheck)
    with ``fields`` over it: ``event_data("booking.confirmed", booking="bk_2")``."""
    from svckit import catalog

    data = struct_pb2.Struct()
    data.update({**catalog.example(kind), **fields})
    return data


@dataclass
class VenvOutside:
    """A venv made with ``python3 -m venv`` in an empty directory outside the repository (no system
    site-packages), and commands run there as a partner or a product team would: from that directory,
    with no PYTHONPATH nor anything of the repository on PATH."""

    home: pathlib.Path  # the empty directory (outside the repository)
    venv: pathlib.Path

    @property
    def env(self) -> dict[str, str]:
        """The machine's environment less anything pointing into the repository or its venv."""
        out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        path = [p for p in out.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))]
        out["PATH"] = os.pathsep.join([str(self.venv / "bin"), *path])
        out["PYTHONNOUSERSITE"] = "1"
        out["PYTHONUNBUFFERED"] = "1"
        return out

    def run(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            list(args),
            cwd=self.home,
            env=self.env,
            input=stdin,
            capture_output=True,
            timeout=120,
            check=False,
        )

    def python(self, code: str) -> subprocess.CompletedProcess[bytes]:
        return self.run(str(self.venv / "bin" / "python"), "-c", code)

    @classmethod
    def made(cls, home: pathlib.Path, *packages: str) -> VenvOutside:
        """A new venv in ``home`` (outside the repository, no system site-packages) with ``packages``
        pip-installed into it."""
        assert ROOT not in home.parents
        p = cls(home, home / "venv")
        made = p.run(sys.executable, "-m", "venv", str(p.venv))
        assert made.returncode == 0, made.stderr
        assert "include-system-site-packages = false" in (p.venv / "pyvenv.cfg").read_text()
        pip = p.run(str(p.venv / "bin" / "pip"), "install", "-q", *packages)
        assert pip.returncode == 0, pip.stderr.decode()
        return p


def built_wheel(script: str, out: pathlib.Path, stem: str) -> pathlib.Path:
    """The wheel ``scripts/<script>`` builds into ``out`` (it prints the wheel's and the sdist's paths)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    wheel = pathlib.Path(done.stdout.splitlines()[0])
    assert wheel.name.startswith(f"{stem}-") and wheel.suffix == ".whl" and wheel.exists()
    assert pathlib.Path(done.stdout.splitlines()[1]).exists()  # and the sdist
    return wheel


def script(name: str) -> ModuleType:
    """``scripts/<name>.py`` loaded as the module ``name`` (scripts are files, not a package; registered
    in ``sys.modules`` under that name, as its dataclasses and its helpers' imports look it up there)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

"""deploy/image/build-rootfs.sh builds the image without a registry (a debootstrap Debian root, this commit's
code, the locked dependencies) and the image runs: authsvc starts in it as uid 10001, answers READY and stops
cleanly on SIGTERM, and cannot write its own code.

Opt-in (it takes minutes: debootstrap the first time, then pip installs the lock): TRAVEL_IMAGE_TEST=1, as
root, with debootstrap installed. The debootstrap base is kept in TRAVEL_BASE_CACHE
(/var/cache/travel-image/bookworm by default) and copied on later runs."""

from __future__ import annotations

import json
import os
import pathlib
import select
import shutil
import signal
import subprocess
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import ROOT

BUILD = ROOT / "deploy" / "image" / "build-rootfs.sh"
BASE_CACHE = os.environ.get("TRAVEL_BASE_CACHE", "/var/cache/travel-image/bookworm")


def _why_not() -> str:
    if os.environ.get("TRAVEL_IMAGE_TEST") != "1":
        return "opt-in: TRAVEL_IMAGE_TEST=1 builds a Debian root with debootstrap (minutes)"
    if os.geteuid() != 0:
        return "debootstrap and chroot need root"
    if shutil.which("debootstrap") is None:
        return "debootstrap is not installed (apt-get install debootstrap)"
    return ""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    if why := _why_not():
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("image")
    tarball = tmp / "travel.tar.gz"
    env = {**os.environ, "TRAVEL_BASE_CACHE": BASE_CACHE}
    done = subprocess.run(
        [str(BUILD), str(tarball)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{tarball}: " in done.stdout
    tree = tmp / "root"
    tree.mkdir()
    subprocess.run(["tar", "--numeric-owner", "-xpf", str(tarball), "-C", str(tree)], check=True)
    return tree


def _in_image(tree: pathlib.Path, *argv: str) -> subprocess.Popen[str]:
    env = {
        "PATH": "/opt/travel/venv/bin:/usr/bin:/bin",
        "PYTHONPATH": "/opt/travel/app",
        "PYTHONUNBUFFERED": "1",
    }
    command = [
        shutil.which("chroot") or "/usr/sbin/chroot",
        "--userspec=10001:10001",
        str(tree),
        "/usr/bin/env",
        "-C",
        "/opt/travel/app",
        *argv,
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_image_holds_this_commit_run_by_uid_10001_who_cannot_write_it(root: pathlib.Path) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    assert (root / "opt/travel/app/RELEASE").read_text() == head
    passwd = (root / "etc/passwd").read_text()
    assert any(line.startswith("travel:x:10001:10001:") for line in passwd.splitlines())
    touch = _in_image(root, "touch", "/opt/travel/app/svckit/x")
    assert touch.wait(30) != 0


def test_authsvc_starts_in_the_image_and_stops_on_sigterm(root: pathlib.Path) -> None:
    proc = _in_image(
        root, "python", "-m", "authsvc", "serve", "--insecure-dev", "--database", "sqlite:////tmp/authsvc.db",
        "--listen", "127.0.0.1:0", "--metrics-listen", "",
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        deadline, line = time.monotonic() + 60, ""
        while time.monotonic() < deadline and not line.startswith("READY "):
            if select.select([proc.stdout], [], [], 0.5)[0]:
                line = proc.stdout.readline()
                if not line:
                    break
        assert line.startswith("READY "), (proc.stderr.read() if proc.stderr else "")[-3000:]
        port = json.loads(line[len("READY ") :])["grpc_port"]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:  # it serves (and now handles SIGTERM)
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()

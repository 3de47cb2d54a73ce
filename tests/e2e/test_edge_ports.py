"""Issue 9 item 3: moving the edge's ports moves the Host values it accepts (no 421 for every call), and
scripts/run prints its options on --help instead of starting the stack."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import httpx

from edge.testing import edge_args
from tests.e2e.test_edge_processes import authsvc, sandbox_key
from tests.support import ROOT, ServiceProcess, free_port


def without(args: list[str], *flags: str) -> list[str]:
    for flag in flags:
        i = args.index(flag)
        del args[i : i + 2]
    return args


async def test_moved_ports_are_the_accepted_hosts(tmp_path: pathlib.Path) -> None:
    auth = authsvc(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    live, sandbox = free_port(), free_port()
    args = without(
        edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"),
        "--live-listen", "--sandbox-listen", "--live-hosts", "--sandbox-hosts",
    )  # fmt: skip
    env = {"EDGE_LIVE_LISTEN": f"127.0.0.1:{live}", "EDGE_SANDBOX_LISTEN": f"127.0.0.1:{sandbox}"}
    edge = ServiceProcess("edge", args, env=env).start(tmp_path / "edge.log")
    try:
        assert (edge.ports["live_port"], edge.ports["sandbox_port"]) == (live, sandbox)
        _, secret = await sandbox_key(auth.grpc_target, ["account:read"])
        auth_header = {"Authorization": f"Svc {secret}"}
        async with httpx.AsyncClient() as c:
            for host in (f"127.0.0.1:{sandbox}", f"localhost:{sandbox}"):
                r = await c.get(
                    f"http://127.0.0.1:{sandbox}/v1/account", headers={"Host": host, **auth_header}
                )
                assert r.status_code == 200, (host, r.text)
            r = await c.get(f"http://127.0.0.1:{live}/v1/account", headers=auth_header)
            assert r.status_code == 401 and r.json()["error"]["type"] == "environment_mismatch", r.text
            # The old default ports are no host of this edge any more.
            r = await c.get(
                f"http://127.0.0.1:{sandbox}/v1/account", headers={"Host": "127.0.0.1:8081", **auth_header}
            )
            assert r.status_code == 421, r.text
    finally:
        edge.terminate()
        auth.terminate()


async def test_a_free_port_is_reached_at_the_port_it_bound(tmp_path: pathlib.Path) -> None:
    args = without(
        edge_args("127.0.0.1:1", "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"),
        "--live-hosts", "--sandbox-hosts",
    )  # fmt: skip
    edge = ServiceProcess("edge", args).start(tmp_path / "edge.log")
    try:
        port = edge.ports["sandbox_port"]
        async with httpx.AsyncClient() as c:
            r = await c.get(f"http://127.0.0.1:{port}/v1/account")
        assert r.status_code == 401 and r.json()["error"]["type"] == "missing_api_key", r.text
    finally:
        edge.terminate()


def test_run_help_prints_options_and_starts_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/run_stack.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: scripts/run" in done.stdout
    # Every listener of the stack, each service's and each /metrics one, is named.
    for service in ("EDGE_LIVE", "EDGE_SANDBOX", "AUTHSVC", "WEBHOOKD", "PORTAL"):
        assert f"{service}_LISTEN" in done.stdout, service
    for service in ("AUTHSVC", "WEBHOOKD", "EDGE", "PORTAL"):
        assert f"{service}_METRICS_LISTEN" in done.stdout, service
    assert "started" not in done.stdout


def test_run_banner_names_the_edge_port_it_bound() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from run_stack import edge_lines
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    text = "\n".join(edge_lines(18281, "svc_test_x"))
    assert "http://127.0.0.1:18281/v1/account" in text and "ws://127.0.0.1:18281/v1/stream" in text
    assert "8081/" not in text.replace("18281/", "")

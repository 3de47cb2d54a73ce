"""``edge serve --workers 2`` (edge.workers): both workers serve the shared ports, each counts what it
answered on its own /metrics, a worker killed is started again, and SIGTERM to the parent stops all."""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import signal
import urllib.request

import httpx

from edge.testing import edge_args
from tests.e2e.test_edge_processes import authsvc, h, sandbox_key
from tests.support import ServiceProcess


def answered(metrics_port: int) -> int:
    """The 200s a worker counted (edge_http_responses_total on its own /metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    found = re.search(r'^edge_http_responses_total\{status="200"\} ([\d.]+)$', text, re.M)
    return int(float(found.group(1))) if found else 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def until_both_answered(url: str, headers: dict[str, str], workers: list[dict[str, int]]) -> None:
    """New connections until each worker has answered some (the kernel picks the listener per connection)."""
    for _ in range(50):
        for _ in range(10):
            async with httpx.AsyncClient() as c:  # a new connection each time
                r = await c.get(url, headers=headers)
                assert r.status_code == 200, r.text
        counts = await asyncio.to_thread(lambda: [answered(w["metrics_port"]) for w in workers])
        if all(counts):
            return
    raise AssertionError(f"not every worker answered: {counts}")


async def test_two_workers_share_the_ports_restart_and_stop(tmp_path: pathlib.Path) -> None:
    auth = authsvc(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    args = edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    args[args.index("--metrics-listen") + 1] = "127.0.0.1:0"
    edge = ServiceProcess("edge", [*args, "--workers", "2"]).start(tmp_path / "edge.log", timeout=60)
    pids: list[int] = []
    try:
        workers = edge.ports["workers"]
        pids = [w["pid"] for w in workers]
        assert len(set(pids)) == 2 and edge.proc is not None and edge.proc.pid not in pids
        assert len({w["metrics_port"] for w in workers}) == 2
        _, secret = await sandbox_key(auth.grpc_target, ["account:read"])
        url = f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account"
        await until_both_answered(url, h(secret), workers)

        # A worker that dies is started again; the ports keep being served meanwhile.
        os.kill(pids[0], signal.SIGKILL)
        for _ in range(200):
            if "edge worker started" in edge.logs():
                break
            async with httpx.AsyncClient() as c:
                assert (await c.get(url, headers=h(secret))).status_code == 200
            await asyncio.sleep(0.1)
        restarted = re.findall(r'"msg": "edge worker started".*"pid": (\d+)', edge.logs())
        assert restarted and int(restarted[0]) not in pids
        pids.append(int(restarted[0]))
        async with httpx.AsyncClient() as c:
            assert (await c.get(url, headers=h(secret))).status_code == 200
    finally:
        assert edge.terminate() == 0
        auth.terminate()
    assert not any(alive(pid) for pid in pids)
    assert secret not in edge.logs()


def gone(pid: int) -> bool:
    """Exited (reaped, or a zombie nobody has reaped yet)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


async def test_workers_stop_when_their_parent_is_killed(tmp_path: pathlib.Path) -> None:
    """SIGKILL to the parent (nothing forwarded): each worker sees it was reparented and stops itself,
    rather than hold the ports with nobody to stop or restart it."""
    auth = authsvc(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    args = edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    args[args.index("--metrics-listen") + 1] = "127.0.0.1:0"
    edge = ServiceProcess("edge", [*args, "--workers", "2"]).start(tmp_path / "edge.log", timeout=60)
    pids = [w["pid"] for w in edge.ports["workers"]]
    try:
        assert edge.proc is not None
        edge.proc.kill()
        edge.proc.wait()
        for _ in range(300):  # each looks once a second (edge.workers.PARENT_CHECK_SECONDS)
            if all(gone(pid) for pid in pids):
                break
            await asyncio.sleep(0.1)
        assert all(gone(pid) for pid in pids), [pid for pid in pids if not gone(pid)]
    finally:
        for pid in pids:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        auth.terminate()

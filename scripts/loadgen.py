"""Load and CPU measurement shared by the benchmark scripts: wrk (Debian's, installed when missing) or an
httpx fallback in worker processes, a process's and its threads' CPU seconds from /proc, and the
per-thread split of a run. Nothing here starts a service."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable


def install_wrk() -> bool:
    """Installs Debian's wrk when it is missing and this user can (as the bootstrap installs Chromium)."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    print("bench_edge: installing Debian's wrk (apt-get)", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "wrk"]
    for cmd in (install, ["apt-get", "update", "-q"], install):  # the package lists may be stale
        subprocess.run(cmd, env=env, capture_output=True, check=False)
        if shutil.which("wrk"):
            return True
    return False


def wrk(url: str, headers: dict[str, str], seconds: float, connections: int) -> tuple[float, float]:
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    assert m, out
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit(f"{non2xx.group(1)} non-2xx responses from {url}:\n{out}")
    return rps, p99


def _httpx_worker(
    url: str,
    headers: dict[str, str],
    seconds: float,
    conns: int,
    q: multiprocessing.Queue[tuple[float, float]],
) -> None:
    import httpx
    import uvloop

    async def main() -> tuple[int, list[float]]:
        lat: list[float] = []
        end = time.perf_counter() + seconds
        limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
        async with httpx.AsyncClient(limits=limits) as c:

            async def one() -> None:
                while time.perf_counter() < end:
                    t = time.perf_counter()
                    r = await c.get(url, headers=headers)
                    if r.status_code != 200:
                        raise SystemExit(f"{r.status_code} {r.text}")
                    lat.append(time.perf_counter() - t)

            await asyncio.gather(*(one() for _ in range(conns)))
        return len(lat), lat

    n, lat = uvloop.run(main())
    q.put((n / seconds, sorted(lat)[int(len(lat) * 0.99)] * 1000))


def httpx_load(url: str, headers: dict[str, str], seconds: float, connections: int) -> tuple[float, float]:
    q: multiprocessing.Queue[tuple[float, float]] = multiprocessing.Queue()
    p = multiprocessing.Process(target=_httpx_worker, args=(url, headers, seconds, min(connections, 16), q))
    p.start()
    p.join()
    return q.get()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wakeups(pid: int) -> int:
    """The times a process's threads have slept and been woken so far (their voluntary context switches,
    Linux /proc): an idle process's timers and polls, counted finer than its CPU's 10 ms ticks."""
    total = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        total += int(status.split("voluntary_ctxt_switches:", 1)[1].split()[0])
    return total


def thread_cpu(pid: int) -> dict[int, tuple[str, float, float]]:
    """Each thread of a process by id: its name (``comm``) and the user and system CPU seconds it used."""
    threads: dict[int, tuple[str, float, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        threads[int(task.name)] = (name, int(fields[11]) / tick, int(fields[12]) / tick)
    return threads


def add_thread_split(
    split: dict[str, list[float]], before: dict[int, tuple[str, float, float]], pid: int
) -> None:
    """Adds to ``split`` (thread name: [user CPU seconds, system CPU seconds, threads seen]) what each
    thread of ``pid`` used since ``before``; the process's first thread is "main" whatever its ``comm``."""
    for tid, (name, user, system) in thread_cpu(pid).items():
        label = "main" if tid == pid else name
        _, user0, system0 = before.get(tid, (name, 0.0, 0.0))
        entry = split.setdefault(label, [0.0, 0.0, 0.0])
        entry[0] += user - user0
        entry[1] += system - system0
        entry[2] += 1


def measured(
    load: Callable[[str, dict[str, str], float, int], tuple[float, float]],
    pid: int | list[int],
    url: str,
    headers: dict[str, str],
    seconds: float,
    connections: int,
    split: dict[str, list[float]] | None = None,
) -> tuple[float, float, float]:
    """req/s, p99 ms and the server's CPU microseconds per request of one load run against ``url``
    (``pid``: the server's process, or its worker processes); with ``split``, each thread's CPU of
    ``pid`` (one process) is added to it (``add_thread_split``)."""
    pids = pid if isinstance(pid, list) else [pid]
    before = thread_cpu(pids[0]) if split is not None else {}
    cpu0 = sum(cpu_seconds(p) for p in pids)
    rps, p99 = load(url, headers, seconds, connections)
    cpu1 = sum(cpu_seconds(p) for p in pids)
    if split is not None:
        add_thread_split(split, before, pids[0])
    return rps, p99, (cpu1 - cpu0) / max(1.0, rps * seconds) * 1e6


def print_thread_split(name: str, split: dict[str, list[float]], requests: float) -> None:
    """``split`` (add_thread_split) per request and as a share of the process's CPU, busiest first."""
    total = sum(user + system for user, system, _ in split.values()) or 1.0
    print(f"  {name} CPU by thread ({requests:.0f} requests; threads seen summed over the runs):")
    for label, (user, system, seen) in sorted(split.items(), key=lambda kv: -kv[1][0] - kv[1][1]):
        if user + system > 0:
            print(
                f"    {label:<16} {(user + system) / requests * 1e6:7.2f} us/req (user "
                f"{user / requests * 1e6:6.2f}, system {system / requests * 1e6:6.2f})  "
                f"{(user + system) / total:6.1%}  x{seen:.0f}"
            )


# -- processes -----------------------------------------------------------------------------------------

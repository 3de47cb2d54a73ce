"""``--workers N``: N edge processes serving the same live and sandbox ports under one supervising parent.

Each worker is ``python -m edge serve`` with the parent's flags, binding the ports with SO_REUSEPORT:
the kernel spreads new connections over the workers' listeners. A worker has everything of its own (the
authsvc watch and the authorisation cache, the gRPC channels, the per-key rate buckets -- shared only
with ``--redis`` --, the request log buffer, its /metrics listener): N workers are N edges on one port.

The parent binds both ports first without listening (port 0 is resolved once, and the ports stay
reserved while it runs), then starts the workers one after the other (each migrates the idempotency
store at start-up), each on the next metrics port (``--metrics-listen HOST:P``: worker i on P + i; port
0: each picks one). Once every worker has printed its READY line the parent prints its own:
``{"service": "edge", "live_port", "sandbox_port", "metrics_port" (worker 0's), "workers": [{"pid",
"metrics_port"}, ...]}``.

Supervision: SIGTERM or SIGINT to the parent is forwarded to every worker, each shuts down gracefully as
one edge does (``--shutdown-grace``), and the parent exits once all have (0 when every worker exited
0). A worker that exits by itself after it was ready is started again (its connections are lost, the
other workers go on serving). A worker that fails before it is ready, at start-up or restarted, stops
the whole edge (SIGTERM to the others, exit 1): a configuration that cannot start is not retried in a
loop. A worker whose parent dies without stopping it (SIGKILL, the OOM killer) stops itself as on SIGTERM
(``follow_parent``): orphaned, it would go on holding the port with nobody to stop or restart it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from svckit.runner import print_ready
from svckit.webserver import bind

log = logging.getLogger("edge")
# How often a worker looks whether its parent is still there (follow_parent).
PARENT_CHECK_SECONDS = 1.0

# Seconds a worker has to print its READY line.
START_TIMEOUT = 60.0


def metrics_listen_of(listen: str, index: int) -> str:
    """Worker ``index``'s --metrics-listen: port + index, port 0 kept (each picks one), empty kept."""
    if not listen:
        return ""
    host, _, port = listen.rpartition(":")
    return f"{host}:{int(port) + index if int(port) else 0}"


def worker_argv(argv: Sequence[str], live: str, sandbox: str, metrics: str) -> list[str]:
    """A worker's ``edge`` arguments: the parent's (``serve ...``), the concrete listeners after them
    (the last of a flag wins), one worker, the ports shared."""
    return [*argv, "--live-listen", live, "--sandbox-listen", sandbox, "--metrics-listen", metrics,
            "--workers", "1", "--reuse-port"]  # fmt: skip


class WorkerFailed(Exception):
    """A worker exited, or printed no READY line in time, before it was ready."""


@dataclass
class Worker:
    index: int
    argv: list[str]
    proc: asyncio.subprocess.Process | None = None
    ready: dict[str, Any] = field(default_factory=dict)

    @property
    def ready_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> None:
        self.ready = {}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "edge", *self.argv, stdout=asyncio.subprocess.PIPE
        )
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(START_TIMEOUT):
                while line := await self.proc.stdout.readline():
                    if line.startswith(b"READY "):
                        self.ready = json.loads(line[6:])
                        return
        except TimeoutError:
            self.signal(signal.SIGTERM)
        raise WorkerFailed(f"edge worker {self.index} did not start (its log is above)")

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)


async def supervise(argv: Sequence[str], count: int, live: str, sandbox: str, metrics: str) -> int:
    """Run ``count`` workers until SIGTERM/SIGINT (exit status: docstring above)."""
    socks = [bind(live, reuse_port=True), bind(sandbox, reuse_port=True)]  # held: the ports stay ours
    try:
        live_at, sandbox_at = (_listen_of(live, socks[0]), _listen_of(sandbox, socks[1]))
        workers = [
            Worker(i, worker_argv(argv, live_at, sandbox_at, metrics_listen_of(metrics, i)))
            for i in range(count)
        ]
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        try:
            for worker in workers:
                await _unless_stopping(worker.start(), stopping)
        except WorkerFailed as exc:
            log.error("edge could not start", extra={"error": str(exc)})
            return await _stop(workers, 1)
        if stopping.is_set():
            return await _stop(workers, 0)
        first = workers[0].ready
        print_ready(
            "edge",
            live_port=first["live_port"],
            sandbox_port=first["sandbox_port"],
            metrics_port=first.get("metrics_port"),
            workers=[{"pid": w.ready_pid, "metrics_port": w.ready.get("metrics_port")} for w in workers],
        )
        return await _watch(workers, stopping)
    finally:
        for sock in socks:
            sock.close()


async def _watch(workers: list[Worker], stopping: asyncio.Event) -> int:
    exits = {asyncio.ensure_future(_exited(w)): w for w in workers}
    stop_wait = asyncio.ensure_future(stopping.wait())
    try:
        while True:
            done, _ = await asyncio.wait([stop_wait, *exits], return_when=asyncio.FIRST_COMPLETED)
            if stop_wait in done:
                return await _stop(workers, 0)
            for task in done:
                worker = exits.pop(task)
                log.error(
                    "edge worker exited; starting it again",
                    extra={"worker": worker.index, "pid": worker.ready_pid, "code": task.result()},
                )
                try:
                    await _unless_stopping(worker.start(), stopping)
                except WorkerFailed as exc:
                    log.error("edge worker could not start again: stopping", extra={"error": str(exc)})
                    return await _stop(workers, 1)
                if worker.ready:
                    log.info("edge worker started", extra={"worker": worker.index, "pid": worker.ready_pid})
                exits[asyncio.ensure_future(_exited(worker))] = worker
    finally:
        stop_wait.cancel()
        for task in exits:
            task.cancel()


async def _exited(worker: Worker) -> int:
    assert worker.proc is not None
    return await worker.proc.wait()


async def _unless_stopping(start: Any, stopping: asyncio.Event) -> None:
    """``start`` (a worker's), cut short by SIGTERM: the parent stops instead of waiting for it."""
    task = asyncio.ensure_future(start)
    stop_wait = asyncio.ensure_future(stopping.wait())
    await asyncio.wait([task, stop_wait], return_when=asyncio.FIRST_COMPLETED)
    stop_wait.cancel()
    if task.done():
        task.result()
    else:
        task.cancel()


async def _stop(workers: list[Worker], status: int) -> int:
    """SIGTERM to every worker, then wait for all (each bounds its own shutdown by --shutdown-grace)."""
    for worker in workers:
        worker.signal(signal.SIGTERM)
    codes = [await w.proc.wait() for w in workers if w.proc is not None]
    return status or int(any(codes))


def _listen_of(listen: str, sock: socket.socket) -> str:
    """``listen`` with the port its socket bound (port 0 resolved)."""
    host = listen.rpartition(":")[0] or "127.0.0.1"
    return f"{host}:{sock.getsockname()[1]}"


def follow_parent(parent: int, every: float = PARENT_CHECK_SECONDS) -> threading.Thread:
    """In a worker: once its parent ``parent`` is gone (the worker was reparented), SIGTERM to itself,
    which stops it gracefully as the parent's own SIGTERM would have."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        log.warning("the edge's supervising parent is gone; this worker stops", extra={"parent": parent})
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="edge-parent-watch", daemon=True)
    thread.start()
    return thread

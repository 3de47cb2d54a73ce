"""What every service's ``serve`` command shares: flags with environment fallbacks, a ready line,
and graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any


def env_name(service: str, flag: str) -> str:
    return f"{service.upper()}_{flag.upper().replace('-', '_')}"


def env_flag_on(service: str, flag: str) -> bool:
    """The environment fallback of an on/off flag: ``<SERVICE>_<FLAG>`` set to 1, true, yes or on."""
    return os.environ.get(env_name(service, flag), "").lower() in ("1", "true", "yes", "on")


def add_serve_args(
    parser: argparse.ArgumentParser, service: str, *, listen: str, metrics: str, database: str | None
) -> None:
    """Flags every service takes; each falls back to ``<SERVICE>_<FLAG>`` in the environment."""

    def add(flag: str, default: str | None, help: str) -> None:
        env = env_name(service, flag)
        parser.add_argument(f"--{flag}", default=os.environ.get(env, default), help=f"{help} (env {env})")

    add("listen", listen, f"gRPC listen address HOST:PORT, port 0 picks one; default {listen}")
    if database is not None:
        env = env_name(service, "database")
        parser.add_argument(
            "--database",
            default=os.environ.get(env) or os.environ.get("DATABASE_URL") or database,
            help=f"SQLAlchemy URL (sqlite+aiosqlite:///path or postgresql+asyncpg://...) "
            f"(env {env}, then DATABASE_URL); default {database}",
        )
    add("metrics-listen", metrics, "Prometheus /metrics address HOST:PORT, empty to disable")
    add("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR")
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        default=float(os.environ.get(env_name(service, "shutdown_grace"), "5")),
        help="seconds running calls may finish after SIGTERM",
    )


def print_ready(service: str, **ports: Any) -> None:
    """One machine-readable line on stdout once the service accepts calls (tests read the ports)."""
    sys.stdout.write("READY " + json.dumps({"service": service, **ports}) + "\n")
    sys.stdout.flush()


async def wait_for_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def run_until_signal(stop: Callable[[], Awaitable[None]]) -> None:
    try:
        await wait_for_signal()
    finally:
        await stop()

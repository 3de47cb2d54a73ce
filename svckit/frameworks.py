"""Every part of Sanic and websockets the edge and the portal use that is not their public API, in this one
module; the framework releases they were tested on; and the start-up check that refuses any other.

Both servers use parts of Sanic and websockets that are not public API (their protocol classes, status
line tables, server objects); a new minor release may change any of them without notice. The versions are
locked (requirements.lock) and bounded in pyproject.toml; this check catches the install that bypassed
both (a hand-made venv, a distribution's package), with one line that says what to do, before a request
is served wrongly. Moving to a new release is deliberate: bump the bound and ``TESTED``, run
``scripts/lock``, and the contract tests (tests/unit/test_framework_contract.py) name what moved.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# The internals (tests/unit/test_framework_contract.py checks each). Importing them changes nothing.
from sanic.application.state import ApplicationServerInfo
from sanic.headers import _HTTP1_STATUSLINES as STATUS_LINES
from sanic.http import Http, Stage
from sanic.response.types import HEADER_TRANSLATION_TABLE
from sanic.server.async_server import AsyncioServer
from sanic.server.protocols.http_protocol import HttpProtocol
from sanic.server.protocols.websocket_protocol import WebSocketProtocol
from sanic.server.websockets.impl import WebsocketImplProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import State

__all__ = [
    "HEADER_TRANSLATION_TABLE",
    "STATUS_LINES",
    "TESTED",
    "ApplicationServerInfo",
    "AsyncioServer",
    "Frame",
    "Http",
    "HttpProtocol",
    "Opcode",
    "Stage",
    "State",
    "UntestedFramework",
    "WebSocketProtocol",
    "WebsocketImplProtocol",
    "check",
    "install",
    "installed_versions",
    "untested",
]
# What ``install`` writes into Sanic's table of status lines: it lacks 421's reason phrase ("421 UNKNOWN"),
# and the edge answers 421 to any Host it does not serve.
MISDIRECTED = b"HTTP/1.1 421 Misdirected Request\r\n"

# distribution -> the tested release series ("major.minor": Sanic's are year.month).
TESTED: dict[str, str] = {"sanic": "25.12", "websockets": "17.4"}


def series(release: str) -> str:
    """``25.12.1`` -> ``25.12``; ``17.4`` -> ``17.4``."""
    return ".".join(release.split(".")[:2])


def untested(installed: dict[str, str | None], tested: dict[str, str] = TESTED) -> list[str]:
    """One line per framework whose installed release (None: not installed) is not of its tested series.
    Pure."""
    lines = []
    for name, want in tested.items():
        have = installed.get(name)
        if have is None:
            lines.append(f"{name} is not installed (tested: {want}.x)")
        elif series(have) != want:
            lines.append(f"{name} {have} is installed, this release was tested on {name} {want}.x")
    return lines


def installed_versions(names: list[str] | None = None) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in names or list(TESTED):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


class UntestedFramework(SystemExit):
    pass


def check() -> None:
    """Refuse to start (UntestedFramework, a SystemExit with one line) on an untested framework release."""
    lines = untested(installed_versions())
    if lines:
        raise UntestedFramework(
            "refusing to start: " + "; ".join(lines) + " (install requirements.lock: scripts/_bootstrap.sh)"
        )


def install() -> None:
    """What the servers change in Sanic, once, at start (``svckit.webserver.start``): the 421 status line."""
    STATUS_LINES[421] = MISDIRECTED

"""The contract between the edge and portal and the parts of Sanic and websockets they use that are not
public API (svckit.frameworks says why). One test per internal: it exists, it has the shape our code
relies on, and where a shape alone proves little, it behaves so over a real socket. A new framework release
that moves one of them fails here by name, before a partner meets it."""

from __future__ import annotations

import inspect
import pathlib
import subprocess
import sys

import pytest
from sanic import headers as sanic_headers
from sanic.application.state import ApplicationServerInfo
from sanic.config import Config
from sanic.http import Http, Stage
from sanic.response.types import HEADER_TRANSLATION_TABLE
from sanic.server.async_server import AsyncioServer
from sanic.server.protocols.http_protocol import HttpProtocol
from sanic.server.protocols.websocket_protocol import WebSocketProtocol
from sanic.server.websockets.impl import WebsocketImplProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, State

from svckit import frameworks

ROOT = pathlib.Path(__file__).resolve().parents[2]


def params(func: object) -> list[str]:
    return list(inspect.signature(func).parameters)  # type: ignore[arg-type]


# -- the versions --------------------------------------------------------------------------------------
def test_installed_frameworks_are_the_tested_series() -> None:
    assert frameworks.untested(frameworks.installed_versions()) == []


@pytest.mark.parametrize(
    ("installed", "refused"),
    [
        ({"sanic": "25.12.1", "websockets": "17.4"}, []),
        ({"sanic": "25.12.9", "websockets": "17.4.2"}, []),  # a patch release of the series
        ({"sanic": "26.3.0", "websockets": "17.4"}, ["sanic 26.3.0"]),  # the next minor
        ({"sanic": "25.12.1", "websockets": "18.0"}, ["websockets 18.0"]),
        ({"sanic": None, "websockets": "17.4"}, ["sanic is not installed"]),
    ],
)
def test_untested_names_each_framework_that_moved(installed, refused) -> None:
    lines = frameworks.untested(installed, {"sanic": "25.12", "websockets": "17.4"})
    assert len(lines) == len(refused)
    for line, start in zip(lines, refused, strict=True):
        assert line.startswith(start)


def test_the_check_refuses_with_one_line(monkeypatch) -> None:
    monkeypatch.setattr(frameworks, "installed_versions", lambda: {"sanic": "26.3.0", "websockets": "17.4"})
    with pytest.raises(SystemExit) as raised:
        frameworks.check()
    message = str(raised.value.code)
    assert "\n" not in message and "sanic 26.3.0" in message and "25.12" in message


# -- sanic.headers, sanic.response.types (edge/server.py, edge/responses.py) ------------------------------
def test_status_line_table() -> None:
    table = sanic_headers._HTTP1_STATUSLINES
    assert table is frameworks.STATUS_LINES and table[200] == b"HTTP/1.1 200 OK\r\n"
    # A list indexed by status, each line whole (frameworks.install writes the 421 line).
    assert isinstance(table, list) and len(table) > 599
    assert table[421].startswith(b"HTTP/1.1 421 ") and table[421].endswith(b"\r\n")


NO_SIDE_EFFECT = """
from sanic import headers
before = headers._HTTP1_STATUSLINES[421]
import svckit.frameworks, svckit.webserver, edge.server, edge.responses, edge.wsintake, edge.app, portal.app
assert headers._HTTP1_STATUSLINES[421] == before == b"HTTP/1.1 421 UNKNOWN\\r\\n", before
svckit.frameworks.install()
assert headers._HTTP1_STATUSLINES[421] == b"HTTP/1.1 421 Misdirected Request\\r\\n"
print("ok")
"""


def test_importing_changes_nothing_and_install_writes_the_421_line() -> None:
    """Every internal is touched from svckit.frameworks only, and only when ``install`` is called (the
    servers' start): importing the edge, the portal or the module itself changes no framework state."""
    done = subprocess.run(
        [sys.executable, "-c", NO_SIDE_EFFECT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_header_translation_table() -> None:
    assert "x-request-id".translate(HEADER_TRANSLATION_TABLE) == "x-request-id"
    assert "a\r\nb".translate(HEADER_TRANSLATION_TABLE) != "a\r\nb"  # control characters are mapped away


# -- sanic.http.Http, the cycle EdgeHttp overrides (edge/server.py, svckit/pacing.py) ---------------------
def test_http_cycle_methods_and_fields() -> None:
    for name, args in {
        "http1_request_header": ["self"],
        "http1_response_header": ["self", "data", "end_stream"],
        "read": ["self"],
        "create_empty_request": ["self"],
    }.items():
        assert params(getattr(Http, name)) == args, name
    assert inspect.iscoroutinefunction(Http.http1_request_header)
    assert isinstance(Http.HEADER_MAX_SIZE, int)
    assert Stage.IDLE and Stage.HANDLER and Stage.RESPONSE
    http = Http.__new__(Http)
    for field in (
        "recv_buffer",
        "url",
        "request",
        "request_body",
        "head_only",
        "response",
        "keep_alive",
        "expecting_continue",
        "stage",
        "protocol",
        "response_func",
        "response_size",
    ):
        assert field in Http.__slots__ or hasattr(http, field), field


def test_http_protocol_fields_and_send() -> None:
    assert inspect.iscoroutinefunction(HttpProtocol.send)
    assert params(HttpProtocol.send) == ["self", "data"]
    assert issubclass(WebSocketProtocol, HttpProtocol)
    source = inspect.getsource(HttpProtocol)
    for field in ("_task", "_http", "_callback_check_timeouts", "request_timeout", "access_log"):
        assert field in source, field


# -- sanic.config.Config's metaclass (edge/sanicconfig.py) ------------------------------------------------
def test_config_setters_are_counted_by_its_metaclass() -> None:
    class Probe(Config):
        @property
        def PROBE(self) -> object:
            return dict.get(self, "PROBE")

        @PROBE.setter
        def PROBE(self, value: object) -> None:
            dict.__setitem__(self, "PROBE", value)

    assert "PROBE" in Probe.__setters__
    config = Probe()
    config.update({"PROBE": 3})
    assert config["PROBE"] == 3 and config.PROBE == 3


# -- websockets' sans-I/O protocol as Sanic's WebsocketImplProtocol holds it (edge/wsintake.py) -------------
def test_websocket_protocol_objects() -> None:
    for name in ("ws_proto", "io_proto", "pause_frame_fut", "can_pause"):
        assert name in inspect.getsource(WebsocketImplProtocol), name
    assert inspect.iscoroutinefunction(WebsocketImplProtocol.async_data_received)
    assert params(WebsocketImplProtocol.async_data_received) == ["self", "data_to_send", "events_to_process"]
    for name in ("receive_data", "data_to_send", "events_received", "parser_exc", "close_sent", "state"):
        assert name in inspect.getsource(Protocol), name
    assert State.OPEN and Opcode.PING and "opcode" in inspect.signature(Frame).parameters


# -- svckit.webserver: AsyncioServer and the app state, over a real socket --------------------------------
PROBE = """
import asyncio, socket
from sanic import Sanic
from sanic.response import text
from svckit.webserver import start

async def main():
    app = Sanic("contract_probe")

    @app.get("/")
    async def index(request):
        return text("ok")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    running = await start(app, [sock])
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        writer.write(b"GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        print("ANSWER", repr(await reader.read()))
        writer.close()
    finally:
        await running.stop()

asyncio.run(main())
"""


def test_asyncio_server_and_server_info_serve_a_request() -> None:
    """svckit.webserver's start and stop over a real socket, in an interpreter of its own: Sanic rewrites
    its protocol's methods when an app starts (its touch-ups), which another app started in the same
    process may already have done."""
    for name in ("startup", "before_start", "after_start", "before_stop", "after_stop", "close"):
        assert hasattr(AsyncioServer, name), name
    assert "settings" in params(ApplicationServerInfo)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = done.stdout.rpartition("ANSWER ")[2].strip()
    assert answer.startswith("b'HTTP/1.1 200 OK\\r\\n") and answer.endswith("\\r\\n\\r\\nok'"), done.stdout

"""Readiness: an HTTP service answers nothing before its start-up is done (the reproduction of issue 24's
second item: requests during the edge's start-up got 500 with a traceback, the listener being open
before the app's resources were), and ``GET /readyz`` is 503 naming a peer while it is down, 200 again
once it is back, while the liveness ``/healthz`` stays 200 throughout."""

from __future__ import annotations

import asyncio
import pathlib
import time
import uuid
from typing import Any

import httpx
import pytest
from sanic import Sanic, response
from sanic.request import Request

from authsvc.testing import running_authsvc
from portal.app import PortalConfig, create_app
from svcctl.__main__ import build_parser
from svckit.webserver import bind, start
from tests.integration.switchproxy import SwitchProxy
from tests.support import free_port
from webhookd._server import Config, run_server


@pytest.fixture(autouse=True)
def several_apps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sanic rewrites its own methods when an app starts; test mode lets a second app in the process."""
    monkeypatch.setattr(Sanic, "test_mode", True)


async def test_nothing_is_answered_before_the_start_up_is_done() -> None:
    app: Sanic[Any, Any] = Sanic(f"starting_{uuid.uuid4().hex[:8]}", configure_logging=False)
    opened = asyncio.Event()
    go = asyncio.Event()

    @app.get("/")
    async def root(request: Request) -> response.HTTPResponse:
        return response.text(request.app.ctx.resource)  # set by the start-up below

    @app.before_server_start
    async def open_resources(app: Sanic[Any, Any]) -> None:
        opened.set()
        await go.wait()
        app.ctx.resource = "ready"

    sock = bind("127.0.0.1:0")
    port = sock.getsockname()[1]
    starting = asyncio.ensure_future(start(app, [sock]))
    await opened.wait()  # the start-up is under way, not done
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)
    go.set()
    running = await starting
    try:
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{port}/")).text == "ready"
    finally:
        await running.stop(0)


async def test_portal_readyz_names_a_peer_while_it_is_down(tmp_path: pathlib.Path) -> None:
    wh = await run_server(
        Config(database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", listen="127.0.0.1:0"), start_worker=False
    )
    proxy = SwitchProxy("127.0.0.1", wh.port)  # webhookd as the portal reaches it
    await proxy.on()
    try:
        async with running_authsvc(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as (auth, _):
            config = PortalConfig(authsvc=f"127.0.0.1:{auth.port}", webhookd=f"127.0.0.1:{proxy.port}")
            running = await start(create_app(config, name=f"portal_{uuid.uuid4().hex[:8]}"), ["127.0.0.1:0"])
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.ports[0]}") as http:

                    async def readyz(status: int) -> dict[str, object]:
                        end = time.monotonic() + 20
                        while (resp := await http.get("/readyz")).status_code != status:
                            assert time.monotonic() < end, resp.text
                            await asyncio.sleep(0.1)
                        assert (await http.get("/healthz")).status_code == 200
                        body: dict[str, object] = resp.json()
                        return body

                    assert (await readyz(200))["status"] == "ready"
                    await proxy.off()
                    down = await readyz(503)
                    assert (down["status"], down["failing"]) == ("not_ready", ["webhookd"])
                    assert down["checks"] == {"authsvc": "ok", "webhookd": "UNAVAILABLE"}
                    await proxy.on()
                    assert (await readyz(200))["checks"] == {"authsvc": "ok", "webhookd": "ok"}
            finally:
                await running.stop(1)
    finally:
        await proxy.off()
        await wh.stop(0)


async def test_svcctl_health_names_each_process(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every address of a list is asked on its own: the one without a process shows, and the exit is 1."""
    dead = free_port()
    async with running_authsvc(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as (auth, _):
        up = f"127.0.0.1:{auth.port}"
        flags = ["--insecure-dev", "--authsvc", f"{up},127.0.0.1:{dead}", "--webhookd", f"127.0.0.1:{dead}"]
        args = build_parser().parse_args([*flags, "health"])
        assert await args.handler(args) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"authsvc {up}  SERVING",
        f"authsvc 127.0.0.1:{dead}  UNAVAILABLE",
        f"webhookd 127.0.0.1:{dead}  UNAVAILABLE",
    ]

"""``svc listen`` stops on Ctrl-C even when the cancellation asyncio.run sends is swallowed on the way out
of a session (a library closing its connection as it lands): it must not reconnect and run on."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from svccli.listen import Listener


async def test_a_swallowed_cancellation_still_stops_the_reconnect_loop() -> None:
    sessions = 0
    lines: list[str] = []

    async with httpx.AsyncClient() as http:
        listener = Listener("http://127.0.0.1:9", "svc_test_key", "http://127.0.0.1:9/h", "whsec_x", [],
                            lines.append, http)  # fmt: skip

        async def session() -> None:
            nonlocal sessions
            sessions += 1
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if sessions > 1:
                    raise
                # As a library closing its connection can: the (first) cancellation is lost here.

        listener.session = session  # type: ignore[method-assign]
        task = asyncio.create_task(listener.run())
        await asyncio.sleep(0.05)
        task.cancel()
        done, _pending = await asyncio.wait({task}, timeout=5)
        if not done:  # the failure: it reconnected; stop it for good before saying so
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert done, f"svc listen ran on after its cancellation: {lines}"
        with pytest.raises(asyncio.CancelledError):
            await task
    assert sessions == 1
    assert not [line for line in lines if "reconnecting" in line], lines

"""The last step of the edge's background flushers (the request log, the usage counts): stop the flusher's
task, then send what is left once, within a bound, so that a graceful stop neither hangs on a peer that
is gone nor loses what a peer that is there would take."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


async def stop_then_flush(
    task: asyncio.Task[None] | None,
    flush: Callable[[float], Awaitable[bool]],
    timeout: float,  # noqa: ASYNC109 (the final flush's RPC deadline, and the wait's bound past it)
) -> bool:
    """Cancel ``task`` and wait for it, then ``flush(timeout)`` within ``timeout`` + 1 s; whether all went."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    try:
        return await asyncio.wait_for(flush(timeout), timeout + 1)
    except TimeoutError:
        return False

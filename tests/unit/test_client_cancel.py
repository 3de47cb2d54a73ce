"""A client call whose task is cancelled raises CancelledError, whatever grpc.aio raises.

grpc.aio can lose the cancellation: when the task is cancelled just as the call fails (the peer went
away), grpc's inner task swallows the CancelledError and the call raises its own error instead. Mapped to
a ClientError (an ``Exception``), a flusher cancelled at shutdown took it for a failed send and looped on;
an edge hung 15 s on SIGTERM that way (tests/e2e/test_credit_ledger.py's teardown). The fakes here do what
grpc.aio does in that race; the real library's behaviour is not reproducible on demand."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from svckit.clients.errors import PeerUnavailable, mapped_errors
from svckit.clients.rpc import ResponseStream, UnaryMethod


def _unavailable() -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "gone")


_LOST = {"left": 0}


async def _call_losing_the_cancel(request: Any, **_kw: Any) -> Any:
    """As grpc.aio in the race: the cancel reaches the call, which then raises its own error (once per
    test, so that a regression fails the test instead of hanging the loop's teardown)."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        if _LOST["left"] > 0:
            _LOST["left"] -= 1
            raise _unavailable() from None
        raise


@pytest.fixture(autouse=True)
def _lose_one_cancel() -> None:
    _LOST["left"] = 1


async def _call_failing(request: Any, **_kw: Any) -> Any:
    raise _unavailable()


async def test_a_cancelled_unary_call_raises_cancelled_not_the_calls_error() -> None:
    method: UnaryMethod[Any, Any] = UnaryMethod(_call_losing_the_cancel, timeout=30)
    task = asyncio.create_task(method(object()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_failing_unary_call_not_cancelled_is_still_a_client_error() -> None:
    method: UnaryMethod[Any, Any] = UnaryMethod(_call_failing, timeout=30)
    with pytest.raises(PeerUnavailable):
        await method(object())


async def test_a_cancelled_call_in_mapped_errors_raises_cancelled() -> None:
    async def raw_stub_call() -> None:
        with mapped_errors():
            await _call_losing_the_cancel(None)

    task = asyncio.create_task(raw_stub_call())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class _StreamLosingTheCancel:
    async def read(self) -> Any:
        return await _call_losing_the_cancel(None)


async def test_a_cancelled_stream_read_raises_cancelled() -> None:
    stream: ResponseStream[Any] = ResponseStream(_StreamLosingTheCancel())
    task = asyncio.create_task(stream.read())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_flusher_loop_cancelled_in_that_race_ends() -> None:
    """The shape of the edge's flushers: ``except Exception`` around the call, in a loop."""
    method: UnaryMethod[Any, Any] = UnaryMethod(_call_losing_the_cancel, timeout=30)
    failures = 0

    async def flusher() -> None:
        nonlocal failures
        while True:
            try:
                await method(object())
            except Exception:
                failures += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(flusher())
    await asyncio.sleep(0.01)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done == {task} and task.cancelled() and failures == 0

"""A cancellation a library swallowed: the task is still being cancelled (``Task.cancelling()``), so code
that caught the library's own error, or saw it return, raises CancelledError instead of carrying on.

Seen twice: grpc.aio loses a cancellation that lands as the call fails (its inner task swallows the
CancelledError and the call raises UNAVAILABLE: an edge hung on SIGTERM for 15 s, its request-log flusher
looping on); and ``svc listen``, cancelled once by Ctrl-C, would reconnect and run on."""

from __future__ import annotations

import asyncio


def raise_if_cancelling(cause: BaseException | None = None) -> None:
    """CancelledError (from ``cause``) when the running task is being cancelled; else nothing."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from cause

"""The bench's receivers, each in a process of its own (trustme certificate, HTTP/1.1 keep-alive): the
healthy one that answers 200, and the isolation phase's hostile ones."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
import tempfile
import time
from typing import Any

from webhookd.testing import Hostile, Receiver


def server_ctx(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    with tempfile.TemporaryDirectory() as d:
        cert, key = pathlib.Path(d, "c.pem"), pathlib.Path(d, "k.pem")
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
    return ctx


def hostile_process(cert_pem: bytes, key_pem: bytes, port_q: Any, stop: Any) -> None:
    """The isolation phase's hostile receivers: one that drips (a byte a second), one that never answers."""
    ctx = server_ctx(cert_pem, key_pem)
    drip, hang = Hostile("drip", ctx).start(), Hostile("hang", ctx).start()
    port_q.put((drip.port, hang.port))
    stop.wait(600)
    port_q.put((drip.requests, hang.requests))
    drip.stop()
    hang.stop()


def receiver_process(cert_pem: bytes, key_pem: bytes, port_q: Any, stop: Any) -> None:
    ctx = server_ctx(cert_pem, key_pem)
    factory = asyncio.new_event_loop
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        pass
    r = Receiver(ctx, record=False, loop_factory=factory).start()
    port_q.put(r.port)
    stop.wait(600)
    port_q.put((r.count, time.process_time()))
    r.stop()

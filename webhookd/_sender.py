"""One signed POST of a delivery and what came back (``Sender``): never raises for anything the endpoint
or the network does; the response's status, first bytes and headers kept for the attempt log."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from svckit import tracing
from svckit.http import ClientTls
from svckit.signing import SignatureScheme, delivery_headers
from webhookd import _metrics as metrics
from webhookd._client_tls import ClientContexts, PlatformCa
from webhookd._http import FastTransport
from webhookd._oauth2 import TokenError, Tokens, fetcher
from webhookd._receiver_auth import ReceiverAuth
from webhookd._retry import Outcome

_ATTEMPTS = {r: metrics.ATTEMPTS.labels(r.value) for r in Outcome}

DELIVERY_TIMEOUT = 10.0
RESPONSE_KEEP = 4096  # bytes of a response body kept in the attempt log
RESPONSE_HEADERS_KEEP = 4096  # bytes of response header names and values kept in the attempt log
WATCH_EVERY = 0.25  # a send is cut off at most this long after its timeout
# What the attempt log keeps of the Authorization header an OAuth2 token was sent in.
TOKEN_SHOWN = "Bearer (OAuth2 token, not kept)"


class AuthFailure(Exception):
    """The receiver's authentication could not be prepared (no token, an unusable certificate); the
    message is safe for the attempt log."""


@dataclass(slots=True)
class SendResult:
    result: Outcome
    status: int
    body: str
    headers: dict[str, str]
    latency_ms: float
    error: str
    response_headers: dict[str, str] = field(default_factory=dict)


def kept_body(content: bytes) -> str:
    """The start of a response body an attempt keeps, as text: a NUL becomes U+FFFD, as an undecodable
    byte does (PostgreSQL refuses NUL in text, and one answer with it would fail every cycle it is in)."""
    return content[:RESPONSE_KEEP].decode("utf-8", "replace").replace("\x00", "\ufffd")


def kept_headers(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The response headers an attempt keeps: lower-case names in the order received, the values of a
    repeated name joined with ", " (RFC 9110 field lines), until their names and values reach
    ``RESPONSE_HEADERS_KEEP`` bytes; that header and the ones after it are dropped (a receiver's headers
    are its own business, a log row has to stay small)."""
    kept: dict[str, str] = {}
    size = 0
    for raw_name, raw_value in headers:
        size += len(raw_name) + len(raw_value)
        if size > RESPONSE_HEADERS_KEEP:
            break
        name = raw_name.decode("ascii", "replace").lower()
        value = raw_value.decode("utf-8", "replace")
        kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept


class Sender:
    """One signed POST; never raises for anything the endpoint or the network does."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        timeout: float = DELIVERY_TIMEOUT,
        *,
        direct: FastTransport | None = None,
    ) -> None:
        self.client = client
        self.timeout = timeout
        # When ``client`` is built on our own transport, deliveries skip the client layer (~230 µs each).
        self.direct = direct
        # Receivers that authenticate us (``webhookd._receiver_auth``): each endpoint's TLS context with
        # its client certificate, and its OAuth2 token, kept between sends.
        self.contexts = ClientContexts(direct.ca_bundle if direct is not None else None)
        self.tokens = Tokens(fetcher(client, timeout))
        # The operator's CA that issues accounts' client certificates (--client-ca-cert), if any.
        self.client_ca: PlatformCa | None = None
        # Timeouts: one watchdog cuts off overdue sends, instead of a timer armed and cancelled per send.
        self._watch_every = max(0.01, min(WATCH_EVERY, timeout / 4))
        self._deadlines: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.TimerHandle | None = None
        self._watch_loop: asyncio.AbstractEventLoop | None = None

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for task, deadline in self._deadlines.items():
            if deadline <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._watchdog = loop.call_later(self._watch_every, self._watch) if self._deadlines else None

    async def send(
        self,
        url: str,
        body: bytes,
        secrets: list[str],
        event_id: str,
        now: dt.datetime,
        scheme: SignatureScheme = SignatureScheme.STRIPE,
        signers: Sequence[Callable[[bytes], bytes]] = (),
        auth: ReceiverAuth | None = None,
    ) -> SendResult:
        headers = delivery_headers(secrets, body, event_id, now, scheme, signers)
        if auth is not None:
            headers.update(auth.headers)  # never one of ours (``_receiver_auth.header_refusal``)
        delivery_span = tracing.start_delivery(event_id, headers)  # adds traceparent; a span when on
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        self._deadlines[task] = loop.time() + self.timeout
        if self._watchdog is None or self._watch_loop is not loop:  # not armed, or armed on a closed loop
            self._watch_loop = loop
            self._watchdog = loop.call_later(self._watch_every, self._watch)
        start = time.perf_counter()
        status, text, error = 0, "", ""
        received: dict[str, str] = {}
        try:
            try:
                if auth is None or auth.empty:
                    status, received, text = await self._post(url, headers, body)
                else:
                    status, received, text = await self._post_authenticated(url, headers, body, auth, now)
            except asyncio.CancelledError:
                # Ours (the watchdog's) becomes a timeout; anyone else's cancellation goes on.
                if task not in self._expired or task.uncancel() > 0:
                    raise
                raise TimeoutError from None
            result = Outcome.SUCCEEDED if 200 <= status < 300 else Outcome.HTTP_ERROR
            if result is Outcome.HTTP_ERROR:
                error = f"endpoint answered HTTP {status}"
        except (TimeoutError, httpx.TimeoutException):
            result, error = Outcome.TIMEOUT, f"no response within {self.timeout:g} s"
        except httpx.HTTPError as exc:
            result, error = Outcome.NETWORK_ERROR, f"{type(exc).__name__}: {exc}"[:500]
        except AuthFailure as exc:
            result, error = Outcome.NETWORK_ERROR, str(exc)[:500]
        finally:
            del self._deadlines[task]
            self._expired.discard(task)
        latency = time.perf_counter() - start
        metrics.LATENCY.observe(latency)
        if delivery_span is not None:
            tracing.end_delivery(delivery_span, status)
        _ATTEMPTS[result].inc()
        return SendResult(result, status, text, headers, latency * 1000, error, received)

    async def _post_authenticated(
        self, url: str, headers: dict[str, str], body: bytes, auth: ReceiverAuth, now: dt.datetime
    ) -> tuple[int, dict[str, str], str]:
        """``_post`` with the endpoint's client certificate and OAuth2 token; a 401 answer to a token
        drops it and the attempt is made once more with a fresh one. ``headers`` (what the attempt log
        keeps) shows that a token was sent, never the token."""
        tls: ClientTls | None = None
        if auth.mtls is not None:
            if self.direct is None:
                raise AuthFailure("client certificates are sent by webhookd's own transport only")
            if auth.mtls.not_after <= now:
                raise AuthFailure(f"the client certificate expired at {auth.mtls.not_after.isoformat()}")
            try:
                tls = self.contexts.get(auth)
            except (ssl.SSLError, ValueError):
                raise AuthFailure("the client certificate could not be loaded") from None
        if auth.oauth2 is None:
            return await self._post(url, headers, body, tls)
        refused = ""
        for _ in range(2):
            try:
                token = await self.tokens.token(auth, refused)
            except TokenError as exc:
                raise AuthFailure(str(exc)) from None
            headers["Authorization"] = TOKEN_SHOWN
            answer = await self._post(url, {**headers, "Authorization": f"Bearer {token}"}, body, tls)
            if answer[0] != 401 or refused:
                return answer
            refused = token
        raise AssertionError("unreachable")

    async def _post(
        self, url: str, headers: dict[str, str], body: bytes, tls: ClientTls | None = None
    ) -> tuple[int, dict[str, str], str]:
        """(status, the kept response headers, the kept start of the response body)."""
        if self.direct is not None:
            # A plain answer (one Content-Length) is read without h11, whose state machine took more than
            # a quarter of a worker's profiled time; any other answer goes to h11 as before.
            status, raw_headers, content = await self.direct.post(url, headers, body, RESPONSE_KEEP, tls=tls)
            return status, kept_headers(raw_headers), kept_body(content)
        async with self.client.stream("POST", url, content=body, headers=headers) as response:
            kept = bytearray()
            async for chunk in response.aiter_bytes():
                kept += chunk
                if len(kept) >= RESPONSE_KEEP:
                    break
            return response.status_code, kept_headers(response.headers.raw), kept_body(bytes(kept))

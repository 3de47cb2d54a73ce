"""``svc listen``: the account's events from /v1/stream, forwarded to a local URL signed exactly like a real
delivery (the headers and signing webhookd uses, svckit.signing), so the receiver's verification code
runs unchanged.

After a drop it reconnects and subscribes with ``since`` = the last event it received, so nothing published
meanwhile is missed; before any event has arrived, it first reads back (GET /v1/events) what was published
since it started. An event seen twice (the stream may repeat around a reconnect) is forwarded once.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.typing import Subprotocol

from svckit.cancellation import raise_if_cancelling
from svckit.signing import SignatureScheme, delivery_headers

# Close codes after which reconnecting cannot help: the key is no longer valid.
FATAL_CLOSE = {4001}
SEEN_MAX = 100_000
# Read-back starts this long before the listener did: a laptop clock a little ahead loses nothing.
CLOCK_MARGIN = dt.timedelta(seconds=5)


class Fatal(Exception):
    """Stop listening: reconnecting cannot help (the key is refused)."""


def stream_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base.removeprefix("https://") + "/v1/stream"
    return "ws://" + base.removeprefix("http://") + "/v1/stream"


def forward_body(event: dict[str, Any]) -> bytes:
    """The envelope as webhookd serialises it (compact, key order kept, UTF-8): the bytes a real delivery
    of this event carries."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


class Listener:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        forward_to: str,
        secret: str,
        events: Sequence[str],
        out: Callable[[str], None],
        http: httpx.AsyncClient,
        scheme: SignatureScheme = SignatureScheme.STRIPE,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = stream_url(base_url)
        self.api_key = api_key
        self.forward_to = forward_to
        self.secret = secret
        self.events = list(events)
        self.out = out
        self.http = http
        self.scheme = scheme
        self.since = ""
        self.started = dt.datetime.now(dt.UTC) - CLOCK_MARGIN
        self.connected_once = False
        self._seen: set[str] = set()
        self._order: collections.deque[str] = collections.deque()

    def _remember(self, event_id: str) -> bool:
        """False when ``event_id`` was seen before."""
        if event_id in self._seen:
            return False
        self._seen.add(event_id)
        self._order.append(event_id)
        if len(self._order) > SEEN_MAX:
            self._seen.discard(self._order.popleft())
        return True

    async def forward(self, event: dict[str, Any]) -> None:
        event_id = str(event.get("id", ""))
        if not self._remember(event_id):
            return
        self.since = event_id
        body = forward_body(event)
        headers = delivery_headers([self.secret], body, event_id, time.time(), self.scheme)
        try:
            resp = await self.http.post(self.forward_to, content=body, headers=headers)
            result = f"[{resp.status_code}]"
        except httpx.HTTPError as exc:
            result = f"[error: {type(exc).__name__}]"
        self.out(f"{event.get('created', '')}  --> {event.get('type', '?'):<26} {event_id}  <-- {result}")

    async def catch_up(self) -> None:
        """Forward, oldest first, the events published since the start that the stream has not shown:
        only needed when a drop came before the first event (else ``since`` resumes the stream)."""
        params: dict[str, str] = {
            "created[gte]": self.started.isoformat().replace("+00:00", "Z"),
            "limit": "100",
        }
        if self.events:
            params["type"] = ",".join(self.events)
        found: list[dict[str, Any]] = []
        headers = {"Authorization": f"Svc {self.api_key}", "Accept": "application/json"}
        while True:
            resp = await self.http.get(f"{self.base_url}/v1/events", params=params, headers=headers)
            if resp.status_code != 200:
                self.out(f"could not read back missed events (HTTP {resp.status_code})")
                return
            page = resp.json()
            found += page["data"]
            if not page.get("nextPageToken"):
                break
            params["page_token"] = page["nextPageToken"]
        self.out(f"read back {len(found)} event(s) published while disconnected")
        for event in sorted(found, key=lambda e: (e["created"], e["id"])):
            await self.forward(event)

    async def session(self) -> None:
        subprotocols = [Subprotocol("svc"), Subprotocol(self.api_key)]
        async with connect(self.url, subprotocols=subprotocols, open_timeout=10, ping_interval=20) as ws:
            if self.connected_once and not self.since:
                await self.catch_up()
            self.connected_once = True
            subscribe: dict[str, Any] = {"type": "subscribe", "events": self.events or ["*"]}
            if self.since:
                subscribe["since"] = self.since
            await ws.send(json.dumps(subscribe))
            async for raw in ws:
                msg = json.loads(raw)
                kind = msg.get("type")
                if kind == "event":
                    await self.forward(msg["event"])
                elif kind == "subscribed":
                    resumed = f" (resuming after {self.since})" if self.since else ""
                    self.out(f"Ready: listening for {', '.join(msg.get('events') or ['*'])}{resumed}")
                elif kind == "error":
                    raise Fatal(f"the stream refused: {msg['error'].get('message', '')}")

    async def run(self) -> None:
        delay = 0.2
        while True:
            started = time.monotonic()
            try:
                await self.session()
                reason = "the stream closed"
            except ConnectionClosed as exc:
                if exc.rcvd is not None and exc.rcvd.code in FATAL_CLOSE:
                    raise Fatal(f"the stream was closed: {exc.rcvd.reason}") from None
                reason = "the connection dropped"
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403, 421):
                    raise Fatal(
                        f"the sandbox refused the connection: {_error_message(exc.response.body)}"
                    ) from None
                reason = f"the sandbox answered HTTP {status}"
            except (OSError, TimeoutError, WebSocketException, httpx.HTTPError) as exc:
                reason = f"cannot connect ({type(exc).__name__})"
            # Ctrl-C cancels the task once: a library that swallowed it must not make us reconnect.
            raise_if_cancelling()
            if time.monotonic() - started > 5:
                delay = 0.2
            self.out(f"{reason}; reconnecting in {delay:g} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def _error_message(body: bytes | bytearray) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return "no error body"

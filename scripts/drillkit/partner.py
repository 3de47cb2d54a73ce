"""The partner: steady calls through both edges (and the portal's sign-in page), each retried once on the
other edge after a 5xx or a broken connection, as an SDK behind a balancer would; every answer's status kept,
and any body that shows the service's insides (a traceback, SQL, a file path, a driver's name)."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass, field

import httpx

from drillkit.stack import BOOKINGS
from drillkit.verdict import leak_in


@dataclass
class Call:
    at: float  # monotonic, when the first try ended (a kill counts for the window it fell in)
    kind: str  # "GET", "POST" (a sample event), "BOOK" (a booking through the slow upstream), "PAGE" (portal)
    first_error: str  # why the first try failed ("" when it did not)
    error: str  # "" when the partner got its answer (after at most one retry)
    status: str  # the final answer's status, or the transport error's name
    leaks: list[str] = field(default_factory=list)  # internal details seen in any answer's body


@dataclass
class Partner:
    http: httpx.AsyncClient
    edges: list[tuple[str, str]]
    portal: str
    live_key: str
    sandbox_key: str
    calls: list[Call] = field(default_factory=list)
    accepted: dict[str, float] = field(default_factory=dict)  # event id -> wall time of the 202
    booking_keys: set[str] = field(default_factory=set)
    booked: set[str] = field(default_factory=set)  # Idempotency-Keys of bookings answered 2xx

    async def _once(self, kind: str, edge: int, idem: str) -> httpx.Response:
        live, sandbox = self.edges[edge]
        if kind == "PAGE":
            return await self.http.get(f"{self.portal}/signin")
        if kind == "GET":
            return await self.http.get(
                f"{live}/v1/account", headers={"Authorization": f"Bearer {self.live_key}"}
            )
        headers = {"Authorization": f"Bearer {self.sandbox_key}", "Idempotency-Key": idem}
        if kind == "BOOK":
            self.booking_keys.add(idem)
            headers["X-Partner-Customer-Ref"] = "drill-traveller"
            return await self.http.post(f"{sandbox}{BOOKINGS}", headers=headers, json={"offer": "drill"})
        body = {"type": "booking.confirmed"}
        return await self.http.post(f"{sandbox}/v1/sandbox/events", headers=headers, json=body)

    async def call(self, kind: str, edge: int) -> None:
        idem, ended = str(uuid.uuid4()), 0.0
        first_error, error, status = "", "", ""
        leaks: list[str] = []
        targets = (edge,) if kind == "PAGE" else (edge, 1 - edge)  # the one retry goes to the other edge
        for attempt, target in enumerate(targets):
            where = "portal" if kind == "PAGE" else f"edge#{target + 1}"
            try:
                resp = await self._once(kind, target, idem)
            except httpx.TransportError as exc:
                error, status = f"{type(exc).__name__} ({where})", type(exc).__name__
            else:
                status = str(resp.status_code)
                if resp.status_code >= 400 and (leak := leak_in(resp.text)):
                    leaks.append(f"{resp.status_code} {where}: {leak}")
                if resp.status_code < 500:
                    error = "" if resp.status_code < 300 else _refusal(resp, where)
                    if resp.status_code == 202:
                        self.accepted[resp.json()["event"]["id"]] = time.time()
                    if kind == "BOOK" and resp.status_code < 300:
                        self.booked.add(idem)
                    break
                error = _refusal(resp, where)
            if attempt == 0:
                first_error, ended = error, time.monotonic()
        self.calls.append(Call(ended or time.monotonic(), kind, first_error, error, status, leaks))


def _refusal(resp: httpx.Response, where: str) -> str:
    try:
        kind = resp.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        kind = "?"
    retry = f", Retry-After {resp.headers['retry-after']}" if "retry-after" in resp.headers else ""
    return f"{resp.status_code} {kind}{retry} ({where})"


async def drive(partner: Partner, rate: float, stop: asyncio.Event, book: bool) -> None:
    """Calls at a steady rate, GET, POST (BOOK) and PAGE in turn, alternating edges; never waits for an
    answer."""
    tasks: set[asyncio.Task[None]] = set()
    kinds = ["GET", "POST", "BOOK", "PAGE"] if book else ["GET", "POST", "PAGE"]
    turns = itertools.cycle([(kind, edge) for edge in (0, 1) for kind in kinds])
    tick = time.monotonic()
    while not stop.is_set():
        kind, edge = next(turns)
        task = asyncio.create_task(partner.call(kind, edge))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        tick += 1 / rate
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
    await asyncio.gather(*tasks)

"""The built-in sandbox product simulator: the upstream of every route whose sandbox upstream is
``"builtin"`` (edge.routetable). It runs inside the edge and never touches a supplier; its events go to
webhookd over gRPC (edge.publisher), like every other service's.

Deterministic sample data: three offers per search (``off_<product>_1..3``), three eSIM plans; a booking
or order id derives from the account and the Idempotency-Key. A creation answers 202 ``pending`` and,
``confirm_seconds`` later, publishes the outcome: ``booking.confirmed`` (mode B: ``payment.succeeded``
first) or ``esim.provisioned``; with a failure trigger the trigger's events instead. Modify publishes
``booking.modified``, cancel ``booking.cancelled`` (mode B: then ``payment.refunded``). States are kept in
memory per edge process (the latest 10,000); a well-formed id the process does not know reads as
``confirmed``. Nothing here is counted or charged: the sandbox has no search allowance and no ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from sanic.response import HTTPResponse

from edge.exceptions import EdgeError
from edge.gate import Ctx
from edge.publisher import Publisher
from edge.requestcontext import BareRequest
from edge.responses import json_response
from edge.routetable import ProductRoute
from edge.samples import SAMPLE_DATA_BYTES, STATES, event_data, suffix
from svckit.clients import ClientError

log = logging.getLogger(__name__)

# Offers of a search: (name, amount in minor units); the id is off_<product>_<n>.
OFFERS: dict[str, list[tuple[str, int]]] = {
    "hotels": [("Hotel Sandbox Centrum, double room", 25800), ("Hotel Test Harbour, suite", 41200),
               ("Hostel Example, private room", 8900)],
    "flights": [("SB 101 AMS-LIS, economy", 18900), ("SB 205 AMS-LIS, business", 64500),
                ("SB 330 AMS-LIS, economy light", 12900)],
}  # fmt: skip
PLANS = [
    ("plan_eu_5gb", "Europe 5 GB, 30 days", 1900, 5 * 1024**3),
    ("plan_eu_20gb", "Europe 20 GB, 30 days", 4900, 20 * 1024**3),
    ("plan_world_3gb", "World 3 GB, 15 days", 2900, 3 * 1024**3),
]
CURRENCY = "EUR"
MAX_REMEMBERED = 10_000
RETRY_DELAYS = (0.5, 1, 2, 4, 8, 15, 30)


def _offer(product: str, n: int) -> dict[str, Any]:
    name, amount = OFFERS[product][n - 1]
    return {
        "object": "offer",
        "id": f"off_{product}_{n}",
        "product": product,
        "name": name,
        "amount": amount,
        "currency": CURRENCY,
        "livemode": False,
    }


def _parse_offer(product: str, offer_id: str) -> dict[str, Any]:
    prefix = f"off_{product}_"
    n = offer_id.removeprefix(prefix)
    if not offer_id.startswith(prefix) or n not in {"1", "2", "3"}:
        raise EdgeError(f"no {product} offer {offer_id[:64]!r}; search to get offer ids", type="not_found")
    return _offer(product, int(n))


def _plan(plan_id: str) -> tuple[str, str, int, int]:
    for plan in PLANS:
        if plan[0] == plan_id:
            return plan
    raise EdgeError(f"no eSIM plan {plan_id[:64]!r}; GET /v1/esim/plans lists them", type="not_found")


class Simulator:
    def __init__(self, publisher: Publisher, confirm_seconds: float) -> None:
        self.publisher = publisher
        self.confirm_seconds = confirm_seconds
        self.subjects: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.tasks: set[asyncio.Task[None]] = set()

    # -- state -------------------------------------------------------------------------------------
    def _remember(self, subject: dict[str, Any]) -> None:
        sid = subject.get("booking") or subject["order"]
        self.subjects[sid] = subject
        self.subjects.move_to_end(sid)
        while len(self.subjects) > MAX_REMEMBERED:
            self.subjects.popitem(last=False)

    def _known(self, ctx: Ctx, product: str, sid: str) -> dict[str, Any]:
        field = "order" if product == "esim" else "booking"
        prefix = "ord_test_" if product == "esim" else "bk_test_"
        subject = self.subjects.get(sid)
        if subject is not None and subject["_account"] == ctx.caller.account_id:
            return subject
        if not sid.startswith(prefix) or len(sid) != len(prefix) + 12:
            raise EdgeError(f"no {field} {sid[:64]!r}", type="not_found")
        # Made by another edge process (or before a restart): sample data under the asked id.
        if product == "esim":
            plan_id, _name, amount, _limit = PLANS[0]
            found = {"order": sid, "product": product, "plan": plan_id, "amount": amount}
        else:
            offer = _offer(product, 1)
            found = {"booking": sid, "product": product, "offer": offer["id"], "amount": offer["amount"]}
        found.update({"currency": CURRENCY, "_account": ctx.caller.account_id, "_state": "confirmed"})
        return found

    @staticmethod
    def _public(subject: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in subject.items() if not k.startswith("_")}

    def _answer(self, subject: Mapping[str, Any], status: int = 200) -> HTTPResponse:
        kind = "esim_order" if "order" in subject else "booking"
        body = {
            "object": kind,
            "id": subject.get("booking") or subject.get("order"),
            "state": subject["_state"],
            "livemode": False,
            **self._public(subject),
        }
        return json_response(body, status=status)

    # -- events ------------------------------------------------------------------------------------
    async def _publish(self, ctx: Ctx, kind: str, subject: Mapping[str, Any], extra: Any = None) -> None:
        sid = subject.get("booking") or subject.get("order")
        await self.publisher.publish(
            ctx.caller.account_id,
            ctx.environment,
            kind,
            STATES[kind],
            event_data(kind, self._public(subject), ctx.caller.account_mode, extra),
            key=f"sim:{sid}:{kind}:{ctx.request_id}",
            request_id=ctx.request_id,
        )

    async def _outcome(self, ctx: Ctx, subject: dict[str, Any]) -> None:
        await asyncio.sleep(self.confirm_seconds)
        mode = ctx.caller.account_mode
        if ctx.trigger is not None and ctx.trigger.failure_events:
            kinds = list(ctx.trigger.failure_events)
            state = "failed"
        else:
            kinds = ["payment.succeeded"] if mode == "B" else []
            kinds.append("esim.provisioned" if "order" in subject else "booking.confirmed")
            state = "provisioned" if "order" in subject else "confirmed"
        for kind in kinds:
            # The 202 promised an outcome: retry (same idempotency key, so never twice) while webhookd
            # is unreachable, for about a minute.
            for delay in (*RETRY_DELAYS, None):
                try:
                    await self._publish(ctx, kind, subject)
                    break
                except ClientError as exc:
                    if exc.type != "service_unavailable" or delay is None:
                        raise
                    await asyncio.sleep(delay)
        subject["_state"] = state

    def _spawn(self, ctx: Ctx, subject: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._outcome(ctx, subject))
        self.tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self.tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("sandbox outcome not published", exc_info=t.exception())

        task.add_done_callback(done)

    async def drain(self, within: float) -> None:
        """Let the outcomes already promised (202 answered) reach webhookd before the process stops."""
        if self.tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await asyncio.gather(*self.tasks, return_exceptions=True)
        for task in list(self.tasks):
            task.cancel()

    # -- routes ------------------------------------------------------------------------------------
    async def answer(
        self, route: ProductRoute, request: BareRequest, ctx: Ctx, params: Mapping[str, str]
    ) -> HTTPResponse:
        action = route.builtin_action
        product = route.path.split("/")[2]
        if action == "search":
            offers = [_offer(product, n) for n in (1, 2, 3)]
            return json_response({"object": "list", "data": offers, "query": dict(request.args)})
        if action == "offer":
            return json_response(_parse_offer(product, params["offer_id"]))
        if action == "plans":
            return json_response(
                {
                    "object": "list",
                    "data": [
                        {"object": "esim_plan", "id": p, "name": n, "amount": a, "currency": CURRENCY}
                        | {"dataBytes": b}
                        for p, n, a, b in PLANS
                    ],
                }
            )
        if action == "create":
            return self._create(request, ctx, product)
        sid = params.get("booking_id") or params.get("order_id") or ""
        subject = self._known(ctx, product, sid)
        if action == "get":
            return self._answer(subject)
        if action == "usage":
            limit = next((p[3] for p in PLANS if p[0] == subject.get("plan")), SAMPLE_DATA_BYTES)
            used = int(suffix(sid), 16) % (limit // 2)
            usage = {"object": "esim_usage", "order": sid, "usedBytes": used, "limitBytes": limit}
            return json_response({**usage, "livemode": False})
        if subject["_state"] in ("cancelled", "failed", "pending"):
            state = subject["_state"]
            raise EdgeError(f"the booking {sid} is {state}; it cannot be changed", type="conflict")
        if action == "modify":
            changes = {k: v for k, v in (ctx.body or {}).items()}
            if not changes:
                raise EdgeError("send the fields to change as a JSON object", type="invalid_request")
            await self._publish(ctx, "booking.modified", subject, {"changes": changes})
            return self._answer(subject)
        # cancel: the state changes once its events are stored, so a 503 leaves it retryable
        await self._publish(ctx, "booking.cancelled", subject)
        if ctx.caller.account_mode == "B":
            await self._publish(ctx, "payment.refunded", subject)
        subject["_state"] = "cancelled"
        self._remember(subject)
        return self._answer(subject)

    def _create(self, request: BareRequest, ctx: Ctx, product: str) -> HTTPResponse:
        body = ctx.body or {}
        key = request.headers.get("idempotency-key", "")
        token = hashlib.sha256(f"{ctx.caller.account_id}\n{key}".encode()).hexdigest()[:12]
        subject: dict[str, Any]
        if product == "esim":
            plan_id = body.get("plan", PLANS[0][0])
            if not isinstance(plan_id, str):
                raise EdgeError("plan must be a plan id string (plan_...)", type="invalid_request")
            plan = _plan(plan_id)
            subject = {"order": f"ord_test_{token}", "product": product, "plan": plan[0], "amount": plan[2]}
        else:
            offer_id = body.get("offer", f"off_{product}_1")
            if not isinstance(offer_id, str):
                msg = f"offer must be an offer id string (off_{product}_...)"
                raise EdgeError(msg, type="invalid_request")
            offer = _parse_offer(product, offer_id)
            subject = {
                "booking": f"bk_test_{token}",
                "product": product,
                "offer": offer["id"],
                "amount": offer["amount"],
            }
        subject["currency"] = CURRENCY
        if ctx.customer_ref:
            subject["customerRef"] = ctx.customer_ref
        subject.update({"_account": ctx.caller.account_id, "_state": "pending"})
        self._remember(subject)
        self._spawn(ctx, subject)
        return self._answer(subject, status=202)

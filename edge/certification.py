"""The edge's half of a certification run (docs/sandbox.md "Go live"): for the one sandbox key an open
run belongs to (``Caller.cert_run_id``, from the account in every Authorize answer), every POST not marked
``X-Certification-Probe`` is counted by authsvc (ClaimCertificationFault) and answered the fault the
published schedule gives it instead of reaching the product; and every request of that key is recorded in
full for the run's checks (RecordCertificationRequests), unlike the request log, which samples successes.
A record holds metadata and two SHA-256 digests (of the Idempotency-Key and of the body), never a value.

Other keys, other accounts and live traffic never take this path: one comparison on the caller, only
true for the run's key until the run's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from google.protobuf import timestamp_pb2
from multidict import istr
from sanic.response import HTTPResponse

from edge.responses import error_response
from svckit.certification import FAULT_RETRY_AFTER, FAULT_STATUS, PROBE_HEADER, Fault
from svckit.clients import ClientError
from svckit.errors import ServiceError, http_status
from travel.auth.v1 import auth_pb2 as pb

if TYPE_CHECKING:
    from edge.authcache import Answer, Caller
    from edge.requestcontext import BareRequest
    from svckit.clients import AuthClient

log = logging.getLogger(__name__)

SANDBOX_TRIGGER = istr("x-sandbox-trigger")  # as edge.gate reads it
# Records kept while authsvc cannot take them; the oldest beyond are dropped.
MAX_BUFFER = 5_000
FLUSH_INTERVAL = 0.2
# What each fault answers: the error type (its status is the error table's) and the message.
FAULT_ANSWERS: dict[Fault, tuple[str, str]] = {
    Fault.RATE_LIMITED: ("rate_limited", "Certification run: an injected 429; retry after Retry-After."),
    Fault.UNAVAILABLE: (
        "service_unavailable",
        "Certification run: an injected 503; retry with the same Idempotency-Key.",
    ),
    Fault.TIMEOUT: (
        "gateway_timeout",
        "Certification run: an injected 504; retry with the same Idempotency-Key.",
    ),
    Fault.UNAUTHORIZED: ("invalid_api_key", "Certification run: an injected 401; do not retry it in a loop."),
}
assert {FAULT_STATUS[f] for f in FAULT_ANSWERS} == {401, 429, 503, 504}


# The run's own routes (start, status, finish, keys) are neither faulted nor recorded: they are not the
# integration under test, and a finish answered a fault would never close the run.
RUN_ROUTES = "/v1/certification/"


def digest(value: bytes | str | None) -> str:
    """SHA-256 of a header or body as it came; a header's bytes that are not UTF-8 reach us as lone
    surrogates, and ``surrogateescape`` gives them back as those bytes (a digest never raises)."""
    if not value:
        return ""
    raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return hashlib.sha256(raw).hexdigest()


def is_probe(headers: Any) -> bool:
    return headers.get(PROBE_HEADER) is not None


class CertRecorder:
    def __init__(self, auth: AuthClient) -> None:
        self.auth = auth
        self.buffer: deque[tuple[str, str, pb.CertificationRequest]] = deque(maxlen=MAX_BUFFER)
        self._recorded = asyncio.Event()  # set by ``record``: the flusher sleeps on it, not on a timer
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._flush_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.flush(), 2.0)

    async def claim(self, caller: Caller, method: str, headers: Any) -> Fault | None:
        """The fault this request is answered, if any (POSTs not marked as probes only). When authsvc
        cannot be asked, no fault: a run never fails a partner's request the schedule did not."""
        if method != "POST" or is_probe(headers):
            return None
        try:
            answer = await self.auth.claim_certification_fault(
                pb.ClaimCertificationFaultRequest(account_id=caller.account_id, run_id=caller.cert_run_id)
            )
        except Exception:
            log.warning("certification fault not claimed", exc_info=True)
            return None
        return Fault(answer.fault) if answer.fault else None

    def record(
        self,
        caller: Caller,
        *,
        request_id: str,
        method: str,
        path: str,
        status: int,
        error_type: str,
        headers: Any,
        body: bytes | None,
        received_at: float,
        fault: Fault | None = None,
        retry_after: int = 0,
    ) -> None:
        when = timestamp_pb2.Timestamp()
        when.FromNanoseconds(int(received_at * 1e9))
        self.buffer.append(
            (
                caller.account_id,
                caller.cert_run_id,
                pb.CertificationRequest(
                    request_id=request_id,
                    key_id=caller.key_id,
                    method=method,
                    path=path.split("?", 1)[0][:200],
                    status=status,
                    error_type=error_type[:64],
                    idempotency_key_digest=digest(headers.get("Idempotency-Key")),
                    body_digest=digest(body) if method == "POST" else "",
                    fault=fault.value if fault else "",
                    retry_after=retry_after,
                    probe=is_probe(headers),
                    received_at=when,
                ),
            )
        )
        self._recorded.set()

    async def flush(self) -> None:
        batches: dict[tuple[str, str], list[pb.CertificationRequest]] = {}
        while self.buffer:
            account_id, run_id, record = self.buffer.popleft()
            batches.setdefault((account_id, run_id), []).append(record)
        for (account_id, run_id), records in batches.items():
            try:
                await self.auth.record_certification_requests(
                    pb.RecordCertificationRequestsRequest(
                        account_id=account_id, run_id=run_id, requests=records
                    )
                )
            except Exception:
                log.warning("certification records not sent; kept", exc_info=True)
                self.buffer.extendleft((account_id, run_id, r) for r in reversed(records))
                return

    async def _flush_forever(self) -> None:
        """A flush FLUSH_INTERVAL after a record (the records of that span go together), and again while
        records are kept (authsvc did not take them); with none, no wake-up at all."""
        while True:
            await self._recorded.wait()
            await asyncio.sleep(FLUSH_INTERVAL)
            self._recorded.clear()
            await self.flush()
            if self.buffer:
                self._recorded.set()


async def under_run(
    # edge.gate's Gate, Handler, Ctx and RouteKind: edge.gate imports this module, so they are not named.
    gate: Any,
    certs: CertRecorder,
    request: BareRequest,
    handler: Any,
    ctx: Any,
    traveller: str,
    params: dict[str, Any],
    kind: Any,
) -> HTTPResponse:
    """A request of the key a certification run belongs to (edge.certification): a POST may be
    answered the schedule's fault instead of reaching the product; every answer is recorded."""
    started = request.ctx.started
    fault = await certs.claim(ctx.caller, request.method, request.headers)

    def record(status: int, error_type: str, retry_after: int = 0) -> None:
        certs.record(
            ctx.caller,
            request_id=ctx.request_id,
            method=request.method,
            path=request.path,
            status=status,
            error_type=error_type,
            headers=request.headers,
            body=request.body,
            received_at=started,
            fault=fault,
            retry_after=retry_after,
        )

    if fault is not None:
        error_type, message = FAULT_ANSWERS[fault]
        wait = FAULT_RETRY_AFTER if fault is Fault.RATE_LIMITED else 0
        retry = (("Retry-After", str(wait)),) if wait else ()
        docs = gate.docs.base(request.scheme, request.headers.get("host"))
        refused = error_response(error_type, message, ctx.request_id, docs, retry)
        record(refused.status, error_type, wait)
        finished: HTTPResponse = gate.finish(refused, ctx, request, error_type)
        return finished
    try:
        if request.method == "POST":
            response: HTTPResponse = await gate._idempotent(request, handler, ctx, traveller, params, kind)
        else:
            if request.body:
                ctx.body = gate._parse_body(request)
            if traveller != "none":
                await gate._traveller(request, ctx, traveller)
            if request.headers.get(SANDBOX_TRIGGER) is not None:
                await gate._trigger(request, ctx, kind)
            answer = handler(request, ctx, **params)
            response = gate.finish(answer if isinstance(answer, HTTPResponse) else await answer, ctx, request)
    except (ServiceError, ClientError) as exc:
        record(http_status(exc.type), exc.type, getattr(exc, "retry_after", 0))
        raise
    record(response.status, ctx.error_type)
    return response


def record_refusal(certs: CertRecorder, request: BareRequest, answer: Answer, caller: Caller) -> None:
    """A refused request of a run's key (a 401 or 403 before admission) is part of the run too."""
    if request.ctx.started >= caller.cert_run_ends:
        return
    certs.record(
        caller,
        request_id=request.ctx.rid or "",
        method=request.method,
        path=request.path,
        status=http_status(answer.error_type or "invalid_api_key"),
        error_type=answer.error_type,
        headers=request.headers,
        body=request.body,
        received_at=request.ctx.started,
    )

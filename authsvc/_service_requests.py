"""AuthService's request log RPCs: RecordRequests (the edge files what it answered) and ListRequests (the
portal and operators read an account's log); and the hourly purge of records past the retention."""

from __future__ import annotations

import datetime as dt
import logging

import grpc

from authsvc import _convert as cv
from authsvc import _requestlog as rl
from authsvc import _validate as v
from authsvc._errors import InvalidRequest
from authsvc._metrics import REQUESTS_DROPPED, REQUESTS_RECORDED
from authsvc._periodic import Periodic
from authsvc._repository import Repository
from authsvc._service_base import ServicerBase
from svckit.clock import Clock, SystemClock
from svckit.logs import redact
from svckit.pages import BAD_PAGE_TOKEN, BadPageToken, page_parts, page_token
from svckit.protos import timestamp as ts
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

_INVALID = REQUESTS_DROPPED.labels("invalid")
_OVER_BOUND = REQUESTS_DROPPED.labels("daily_bound")


def _printable(value: str, max_len: int) -> str:
    """``value`` cut to ``max_len``, each character that is not printable ASCII replaced by ``?``."""
    cut = value[:max_len]
    if cut.isascii() and cut.isprintable():
        return cut
    return "".join(ch if ch.isascii() and ch.isprintable() else "?" for ch in cut)


def _error_type(value: str) -> str:
    if value and not (
        len(value) <= rl.MAX_ERROR_TYPE and value.replace("_", "a").isalnum() and value.isascii()
    ):
        raise InvalidRequest("error_type: an error type such as missing_scope")
    return value


def _method(value: str) -> str:
    if value and not (
        len(value) <= rl.MAX_METHOD and value.isascii() and value.isalpha() and value.isupper()
    ):
        raise InvalidRequest("method: an HTTP method such as GET")
    return value


def _route(value: str) -> str:
    if value and not rl.valid_route(value):
        raise InvalidRequest("route: a route template such as /v1/hotels/offers/{offer_id}")
    return value


def record_of(r: pb.RequestRecord) -> rl.RequestRecord:
    """A filed record from the edge's; InvalidRequest when an id, the environment or a number is not one.
    The path loses any query string, anything shaped like a secret (svckit.logs.redact) and what is past
    MAX_PATH."""
    if not 100 <= r.status <= 599:
        raise InvalidRequest("status: an HTTP status")
    if r.latency_ms < 0 or not r.HasField("occurred_at"):
        raise InvalidRequest("latency_ms and occurred_at: required")
    return rl.RequestRecord(
        request_id=v.ident(r.request_id, "request_id", "req"),
        account_id=v.ident(r.account_id, "account_id", "acct"),
        environment=cv.environment(r.environment),
        key_id=v.ident(r.key_id, "key_id", "key"),
        key_hint=_printable(redact(r.key_hint), 40),
        method=_printable(r.method.upper(), rl.MAX_METHOD),
        path=_printable(redact(rl.cut_path(r.path)), rl.MAX_PATH),
        status=r.status,
        error_type=_printable(r.error_type, rl.MAX_ERROR_TYPE),
        latency_ms=min(r.latency_ms, 2**31 - 1),
        occurred_at=r.occurred_at.ToDatetime(dt.UTC),
    )


def record_pb(r: rl.RequestRecord) -> pb.RequestRecord:
    return pb.RequestRecord(
        request_id=r.request_id,
        account_id=r.account_id,
        environment=AUTH_ENVIRONMENT.pb(r.environment),
        key_id=r.key_id,
        key_hint=r.key_hint,
        method=r.method,
        path=r.path,
        status=r.status,
        error_type=r.error_type,
        latency_ms=r.latency_ms,
        occurred_at=ts(r.occurred_at),
    )


class RequestLogRpcs(ServicerBase):
    async def RecordRequests(
        self, request: pb.RecordRequestsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordRequestsResponse:
        if len(request.records) > rl.MAX_BATCH:
            raise InvalidRequest(f"records: at most {rl.MAX_BATCH} a call")
        records: list[rl.RequestRecord] = []
        invalid = 0
        for raw in request.records:
            try:
                records.append(record_of(raw))
            except InvalidRequest:
                invalid += 1
        if invalid:
            # A bad record must not cost the batch's good ones; it is counted, never logged with its values.
            _INVALID.inc(invalid)
            log.warning("request log records refused", extra={"count": invalid})
        recorded, dropped = await self.repo.record_requests(records) if records else (0, 0)
        REQUESTS_RECORDED.inc(recorded)
        if dropped:
            _OVER_BOUND.inc(dropped)
        return pb.RecordRequestsResponse(recorded=recorded, dropped=dropped + invalid)

    async def ListRequests(
        self, request: pb.ListRequestsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRequestsResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = (
            cv.environment(request.environment) if request.environment != pb.ENVIRONMENT_UNSPECIFIED else None
        )
        try:
            statuses = rl.statuses(request.status, request.status_class)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        filters = rl.RequestFilter(
            request_id=v.ident(request.request_id, "request_id", "req") if request.request_id else "",
            key_id=v.ident(request.key_id, "key_id", "key") if request.key_id else "",
            statuses=statuses,
            since=request.since.ToDatetime(dt.UTC) if request.HasField("since") else None,
            until=request.until.ToDatetime(dt.UTC) if request.HasField("until") else None,
            error_type=_error_type(request.error_type),
            method=_method(request.method),
            route=_route(request.route),
        )
        size = v.page_size(request.page_size)
        after: tuple[float, str] | None = None
        if request.page_token:
            try:
                at, rid = page_parts(request.page_token, 2)
                after = (float(at), v.ident(rid, "page_token", "req"))
            except (BadPageToken, ValueError, InvalidRequest):
                raise InvalidRequest(BAD_PAGE_TOKEN) from None
        rows = await self.repo.list_requests(account_id, env, filters, size + 1, after)
        out = pb.ListRequestsResponse(requests=[record_pb(r) for r in rows[:size]])
        if len(rows) > size:
            last = rows[size - 1]
            out.next_page_token = page_token(repr(last.occurred_at.timestamp()), last.request_id)
        return out


class RequestLogPurge(Periodic):
    """Deletes the records older than the retention every ``interval`` seconds (and once at start)."""

    task_name = "request-log-purge"
    failure = "request log purge failed; will retry"
    log = log

    def __init__(
        self, repo: Repository, clock: Clock | None = None, interval: float = rl.PURGE_INTERVAL
    ) -> None:
        super().__init__(interval)
        self.repo = repo
        self.clock: Clock = clock or SystemClock()

    async def purge(self) -> int:
        removed = await self.repo.purge_requests(self.clock.now() - rl.RETENTION)
        if removed:
            log.info("purged request log records", extra={"count": removed})
        return removed

    once = purge

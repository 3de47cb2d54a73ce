"""The request log's edge half: each partner request answered for a known key is remembered as one tuple
in a bounded in-memory buffer, and a background task hands the buffer to authsvc
(AuthService.RecordRequests) every second, or as soon as a batch is full.

Recording is on every request's path, so it is one ``deque.append`` of a tuple of what the gate already
holds (the caller, the method and path objects, the status and error type, two clock readings): no await,
no formatting, no proto. Everything else happens in the flusher. Nothing about the log may delay or fail
a partner request: when authsvc cannot be reached the buffer keeps its newest ``MAX_BUFFER`` records and
the oldest are dropped and counted (``edge_request_log_dropped_total``); at shutdown what is left is sent
once, within a short deadline.

What is recorded is metadata only (docs/edge.md "Request log"): time, key id and hint, method, path
without its query string, status, error type, request id, latency. Never a body, a header value or the key.
A request refused before its key was known (no key, a malformed or unknown one, the wrong host) has no
account to be filed under and is not recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from edge.flusher import stop_then_flush
from edge.metrics import REQUEST_LOG_DROPPED, REQUEST_LOG_SENT
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as pb

if TYPE_CHECKING:
    from edge.authcache import Caller
    from svckit.clients import AuthClient

log = logging.getLogger(__name__)

# Records kept while authsvc cannot take them (about 300 bytes each: at most ~6 MB).
MAX_BUFFER = 20_000
# Records in one RecordRequests call (authsvc takes at most 1000), and the count that wakes the flusher.
BATCH = 500
# Answered requests below 400 filed per second by one edge process; beyond it, the second's other
# successes are not filed. Errors (400 and up) are always filed: they are what a partner looks up. At
# thousands of requests a second, filing every success cost the edge a third of its throughput (the
# records' protos, the gRPC batches, and authsvc's inserts on the same cores: docs/edge.md "Request log").
SUCCESSES_PER_SECOND = 50
# The most of a second's filed successes one account takes (issue 34: one partner at 100 requests a second
# made another's successes of that second vanish from its log); the rest are other accounts'.
SUCCESS_SHARE = 0.5
# Errors (400 and up) filed per account per second (by the time they were answered) by one edge process;
# beyond it, that account's other errors of the second are counted, not filed. A tenant refused hundreds of
# times a second (issue 20: a flood of stream handshakes past its open rate) would otherwise fill the buffer
# every tenant's records share, and its records' protos, batches and authsvc's inserts would run on the
# cores partners' requests wait for; the first errors of each second already say what is failing.
ERRORS_PER_ACCOUNT_PER_SECOND = 20
# Records turned into protos per event-loop turn while a batch is built (a 500-record batch built at once
# held the loop for about 2 ms).
BUILD_SLICE = 100
# Seconds from a quiet spell's first record to its flush, then between flushes while records come.
INTERVAL = 1.0
# The longest path sent (authsvc keeps at most 200 characters).
MAX_PATH = 200
# The deadline of the last flush at shutdown, seconds.
FINAL_FLUSH_TIMEOUT = 2.0

_OVERFLOW = REQUEST_LOG_DROPPED.labels("buffer_full")
_UNSENT = REQUEST_LOG_DROPPED.labels("shutdown")
_INVALID = REQUEST_LOG_DROPPED.labels("invalid")
_ACCOUNT_ERRORS = REQUEST_LOG_DROPPED.labels("account_errors")
# The longest latency sent (ms): an int32.
MAX_LATENCY_MS = 2**31 - 1

# (started at, unix s; answered at; caller; method; path; status; error type; request id)
Entry = tuple[float, float, "Caller", str, str, int, str, str]


def success_filed(filed: int, of_account: int, per_second: int, account_cap: int) -> bool:
    """Pure: is one more success of an account filed, given the second's ``filed`` successes and, of them,
    the account's (``of_account``)? While the second's budget (``per_second``) has room and the account
    has not reached its share of it (``account_cap``): one account never takes what the others' requests of
    that second would get, and the budget still bounds what filing costs the edge."""
    return filed < per_second and of_account < account_cap


class RequestLog:
    __slots__ = (
        "_account_successes",
        "_error_second",
        "_errors",
        "_failing",
        "_second",
        "_successes",
        "_task",
        "_wakeup",
        "account_successes",
        "auth",
        "batch",
        "buffer",
        "errors_per_account",
        "errors_skipped",
        "interval",
        "maxlen",
        "overflow",
        "successes_full_until",
        "successes_per_second",
    )

    def __init__(
        self,
        auth: AuthClient,
        *,
        maxlen: int = MAX_BUFFER,
        batch: int = BATCH,
        interval: float = INTERVAL,
        successes_per_second: int = SUCCESSES_PER_SECOND,
        success_share: float = SUCCESS_SHARE,
        errors_per_account: int = ERRORS_PER_ACCOUNT_PER_SECOND,
    ) -> None:
        self.auth = auth
        self.successes_per_second = successes_per_second
        self.errors_per_account = errors_per_account
        self._error_second = 0
        self._errors: dict[str, int] = {}  # the current second's errors filed, by account
        self.errors_skipped = 0  # counted at the next flush, off the request path
        self._second = 0
        self._successes = 0
        self._account_successes: dict[str, int] = {}  # the current second's successes filed, by account
        self.account_successes = max(1, math.ceil(successes_per_second * success_share))
        # The end of the last second whose successes were all filed (files_success said no): a success
        # that started before it is not filed, known without calling files_success (edge.gate.Gate.finish).
        self.successes_full_until = 0.0
        self.maxlen = maxlen
        self.batch = batch
        self.interval = interval
        self.buffer: deque[Entry] = deque(maxlen=maxlen)
        # Records the full buffer pushed out since the last flush (counted there, off the request path).
        self.overflow = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def record(
        self, started: float, caller: Caller, method: str, path: str, status: int, error_type: str, rid: str
    ) -> None:
        """Remember one answered request (O(1), no await), an error within its account's quota
        (``files_error``). edge.gate.Gate.finish does the same inline."""
        answered = time.time()
        if status >= 400 and not self.files_error(caller.account_id, answered):
            return
        buffer = self.buffer
        if not buffer:
            self.first_record()
        elif len(buffer) >= self.batch:
            self.crowded()
        buffer.append((started, answered, caller, method, path, status, error_type, rid))

    def files_success(self, started: float, account_id: str) -> bool:
        """Whether an answered request below 400 of ``account_id`` that started at ``started`` (unix
        seconds) is filed: the first ``successes_per_second`` of each second are, of which one account's
        at most ``account_successes`` (``success_filed``)."""
        second = int(started)
        if second != self._second:
            self._second = second
            self._successes = 0
            self._account_successes.clear()
        of_account = self._account_successes.get(account_id, 0)
        if not success_filed(self._successes, of_account, self.successes_per_second, self.account_successes):
            if self._successes >= self.successes_per_second:
                self.successes_full_until = second + 1  # the second's budget is spent, for everyone
            return False
        self._successes += 1
        self._account_successes[account_id] = of_account + 1
        return True

    def files_error(self, account_id: str, answered: float) -> bool:
        """Whether an error (400 and up) of ``account_id`` answered at ``answered`` (unix seconds) is filed:
        each account's first ``errors_per_account`` of each second are. The counts are of the current
        second only (one dict entry per account with an error in it)."""
        second = int(answered)
        if second != self._error_second:
            self._error_second = second
            self._errors.clear()
        filed = self._errors.get(account_id, 0)
        if filed >= self.errors_per_account:
            self.errors_skipped += 1
            return False
        self._errors[account_id] = filed + 1
        return True

    def first_record(self) -> None:
        """The buffer is empty (checked before an append): wake the flusher, which waits on nothing else
        while there is nothing to send."""
        self._wakeup.set()

    def crowded(self) -> None:
        """The buffer holds a batch or more (checked before an append): wake the flusher, and count the
        record the append will push out of a full buffer."""
        self._wakeup.set()
        if len(self.buffer) >= self.maxlen:
            self.overflow += 1

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="request-log-flush")

    async def _run(self) -> None:
        while True:
            if not self.buffer:  # no timer while there is nothing to send: the first record wakes it
                await self._wakeup.wait()
                self._wakeup.clear()
            with contextlib.suppress(TimeoutError):  # an interval's records go together, or a full batch
                await asyncio.wait_for(self._wakeup.wait(), self.interval)
            self._wakeup.clear()
            await self.flush()

    async def flush(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 (the RPC's deadline)
        """Send the buffer in batches; False when authsvc did not take one (it stays buffered)."""
        if self.overflow:
            _OVERFLOW.inc(self.overflow)
            self.overflow = 0
        if self.errors_skipped:
            _ACCOUNT_ERRORS.inc(self.errors_skipped)
            self.errors_skipped = 0
        buffer = self.buffer
        while buffer:
            taken = [buffer.popleft() for _ in range(min(len(buffer), self.batch))]
            records = []
            for n, entry in enumerate(taken):
                if n and not n % BUILD_SLICE:
                    await asyncio.sleep(0)
                try:
                    records.append(record_pb(entry))
                except ValueError:  # never expected; a record that cannot be sent must not block the rest
                    _INVALID.inc()
            try:
                await self.auth.record_requests(pb.RecordRequestsRequest(records=records), timeout=timeout)
            except Exception as exc:
                self._put_back(taken)
                if not self._failing:
                    self._failing = True
                    log.warning(
                        "request log: authsvc did not take the records; kept, retried",
                        extra={"error": type(exc).__name__, "buffered": len(buffer)},
                    )
                return False
            REQUEST_LOG_SENT.inc(len(taken))
            if self._failing:
                self._failing = False
                log.info("request log: authsvc takes records again")
        return True

    def _put_back(self, taken: list[Entry]) -> None:
        """``taken`` back before what arrived meanwhile; the oldest beyond the bound are dropped, counted."""
        rest = list(self.buffer)
        over = len(taken) + len(rest) - self.maxlen
        if over > 0:
            _OVERFLOW.inc(over)
        self.buffer.clear()
        self.buffer.extend(taken)
        self.buffer.extend(rest)

    async def stop(self) -> None:
        """Stop the flusher and send what is left once, within FINAL_FLUSH_TIMEOUT."""
        task, self._task = self._task, None
        sent = await stop_then_flush(task, self.flush, FINAL_FLUSH_TIMEOUT)
        if not sent and self.buffer:
            _UNSENT.inc(len(self.buffer))
            log.warning("request log: records left unsent at shutdown", extra={"count": len(self.buffer)})
            self.buffer.clear()


def record_pb(entry: Entry) -> pb.RequestRecord:
    started, answered, caller, method, path, status, error_type, rid = entry
    out = pb.RequestRecord(
        request_id=rid,
        account_id=caller.account_id,
        environment=_environment(caller.environment),
        key_id=caller.key_id,
        key_hint=caller.key_hint,
        method=method,
        path=path[:MAX_PATH],
        status=status,
        error_type=error_type,
        latency_ms=min(MAX_LATENCY_MS, max(0, round((answered - started) * 1000))) if started else 0,
    )
    out.occurred_at.FromNanoseconds(int((started or answered) * 1e9))
    return out


def _environment(word: str) -> Any:
    try:
        return AUTH_ENVIRONMENT.pb(word)
    except ValueError:
        return pb.ENVIRONMENT_UNSPECIFIED

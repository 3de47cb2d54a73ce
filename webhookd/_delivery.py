"""The delivery worker: claims due deliveries in batches, POSTs them signed, writes results in batches.

Sending goes through an injected ``httpx.AsyncClient`` (keep-alive pool, SSRF-guarded transport in
production, ``httpx.MockTransport`` in unit tests); every time comes from the injected clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from svckit.clock import Clock
from svckit.ids import new_id
from webhookd import _metrics as metrics
from webhookd._events import TEST_EVENT_KIND
from webhookd._http import FastTransport
from webhookd._repository import (
    FAILED,
    HELD,
    PENDING,
    SUCCEEDED,
    Alert,
    AttemptRecord,
    Claim,
    Outcome,
    Repository,
)
from webhookd._retry import Action, next_attempt
from webhookd._retry import Outcome as Result
from webhookd._signing import SIGNATURE_HEADER, sign

log = logging.getLogger("webhookd.delivery")

USER_AGENT = "Svc-Webhooks/1.0 (+https://docs.svc.travel/webhooks)"
DELIVERY_TIMEOUT = 10.0
RESPONSE_KEEP = 4096
GROUP_COMMIT_WAIT = 0.003


@dataclass(slots=True)
class SendResult:
    result: Result
    status: int
    body: str
    headers: dict[str, str]
    latency_ms: float
    error: str


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

    async def send(
        self, url: str, body: bytes, secrets: list[str], event_id: str, now: dt.datetime
    ) -> SendResult:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Service-Event-Id": event_id,
            SIGNATURE_HEADER: sign(secrets, body, now),
        }
        start = time.perf_counter()
        status, text, error = 0, "", ""
        try:
            async with asyncio.timeout(self.timeout):
                if self.direct is not None:
                    status, content = await self.direct.post(url, headers, body)
                    text = content[:RESPONSE_KEEP].decode("utf-8", "replace")
                else:
                    async with self.client.stream("POST", url, content=body, headers=headers) as response:
                        status = response.status_code
                        kept = bytearray()
                        async for chunk in response.aiter_bytes():
                            kept += chunk
                            if len(kept) >= RESPONSE_KEEP:
                                break
                        text = bytes(kept[:RESPONSE_KEEP]).decode("utf-8", "replace")
            result = Result.SUCCEEDED if 200 <= status < 300 else Result.HTTP_ERROR
            if result is Result.HTTP_ERROR:
                error = f"endpoint answered HTTP {status}"
        except (TimeoutError, httpx.TimeoutException):
            result, error = Result.TIMEOUT, f"no response within {self.timeout:g} s"
        except httpx.HTTPError as exc:
            result, error = Result.NETWORK_ERROR, f"{type(exc).__name__}: {exc}"[:500]
        latency = time.perf_counter() - start
        metrics.LATENCY.observe(latency)
        metrics.ATTEMPTS.labels(result.value).inc()
        return SendResult(result, status, text, headers, latency * 1000, error)


def decide(claim: Claim, sent: SendResult | None, attempted_at: dt.datetime, manual: bool = False) -> Outcome:
    """Pure: the stored outcome of one claimed delivery (``sent`` is None when nothing was sent)."""
    d = claim.delivery
    if claim.endpoint is None:
        return Outcome(d.id, d.endpoint_id, None, FAILED, None, counts_attempt=False)
    if sent is None:
        return Outcome(d.id, d.endpoint_id, None, HELD, None, counts_attempt=False)
    attempt = AttemptRecord(
        id=new_id("att"),
        delivery_id=d.id,
        endpoint_id=d.endpoint_id,
        event_id=d.event_id,
        account_id=d.account_id,
        environment=d.environment,
        attempt_number=d.attempt_count + 1,
        outcome=sent.result.value,
        response_status=sent.status,
        response_body=sent.body,
        request_headers=sent.headers,
        latency_ms=sent.latency_ms,
        error=sent.error,
        attempted_at=attempted_at,
        manual=manual,
    )
    decision = next_attempt(d.schedule_count + 1, sent.result, attempted_at)
    if d.event_type == TEST_EVENT_KIND and decision.action is not Action.DONE:
        # A test send is one attempt: it reports, it never retries and never disables the endpoint.
        return Outcome(d.id, d.endpoint_id, attempt, FAILED, None, counts_attempt=True)
    if decision.action is Action.DONE:
        return Outcome(d.id, d.endpoint_id, attempt, SUCCEEDED, None, counts_attempt=True)
    if decision.action is Action.RETRY:
        return Outcome(d.id, d.endpoint_id, attempt, PENDING, decision.next_attempt_at, counts_attempt=True)
    return Outcome(
        d.id,
        d.endpoint_id,
        attempt,
        FAILED,
        None,
        counts_attempt=True,
        disable_endpoint=True,
        disabled_reason=f"the last of {d.schedule_count + 1} attempts failed: {sent.error}"[:500],
    )


@dataclass
class WorkerConfig:
    batch_size: int = 200
    concurrency: int = 64
    lease_seconds: float = 60.0
    poll_seconds: float = 0.25


class DeliveryWorker:
    def __init__(
        self,
        repo: Repository,
        sender: Sender,
        clock: Clock,
        config: WorkerConfig | None = None,
        *,
        owner: str | None = None,
        on_alerts: Callable[[list[Alert]], None] | None = None,
        on_sent: Callable[[Claim, float], None] | None = None,
    ) -> None:
        self.repo = repo
        self.sender = sender
        self.clock = clock
        self.config = config or WorkerConfig()
        self.owner = owner or new_id("wrk")
        self.on_alerts = on_alerts
        self.on_sent = on_sent
        self._wake = asyncio.Event()
        self._results: list[Outcome] = []
        self._results_ready = asyncio.Event()
        self._inflight = 0
        self._capacity = asyncio.Event()
        self._stopping = False
        self._grace = 5.0
        self._tasks: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Something became due now (a publish, a recover): claim without waiting for the poll."""
        self._wake.set()

    # One claimed delivery

    async def _attempt(self, claim: Claim) -> Outcome:
        ep = claim.endpoint
        now = self.clock.now()
        if ep is None or ep.status != "enabled":
            return decide(claim, None, now)
        due = claim.delivery.next_attempt_at
        if due is not None:
            lag = max(0.0, (now - due).total_seconds())
            metrics.LAG.observe(lag)
            if self.on_sent is not None:
                self.on_sent(claim, lag)
        sent = await self.sender.send(
            ep.url, claim.envelope, ep.valid_secrets(now), claim.delivery.event_id, now
        )
        outcome = decide(claim, sent, now)
        if outcome.status != SUCCEEDED:
            log.info(
                "delivery attempt failed",
                extra={
                    "event_id": claim.delivery.event_id,
                    "endpoint_id": ep.id,
                    "delivery_id": claim.delivery.id,
                    "attempt": outcome.attempt.attempt_number if outcome.attempt else 0,
                    "outcome": sent.result.value,
                    "status": sent.status,
                    "error": sent.error,
                    "next_attempt_at": outcome.next_attempt_at.isoformat()
                    if outcome.next_attempt_at
                    else None,
                    "disable_endpoint": outcome.disable_endpoint,
                },
            )
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "delivered",
                extra={
                    "event_id": claim.delivery.event_id,
                    "endpoint_id": ep.id,
                    "delivery_id": claim.delivery.id,
                },
            )
        return outcome

    async def _write(self, outcomes: list[Outcome]) -> None:
        now = self.clock.now()
        alerts = await self.repo.record_outcomes(outcomes, self.owner, now)
        for alert in alerts:
            metrics.ENDPOINTS_DISABLED.inc()
            log.warning(
                "endpoint disabled after its last retry failed",
                extra={
                    "endpoint_id": alert.endpoint_id,
                    "account_id": alert.account_id,
                    "reason": alert.reason,
                },
            )
        if alerts and self.on_alerts is not None:
            self.on_alerts(alerts)

    async def run_once(self, limit: int | None = None) -> int:
        """Claim what is due now, send it all, write the results; the number of deliveries handled.

        Tests drive the schedule with a FakeClock through this; ``run`` is the pipelined version.
        """
        now = self.clock.now()
        claims = await self.repo.claim_due(
            now,
            limit or self.config.batch_size,
            now + dt.timedelta(seconds=self.config.lease_seconds),
            self.owner,
        )
        if not claims:
            return 0
        outcomes = await asyncio.gather(*(self._attempt(c) for c in claims))
        await self._write(list(outcomes))
        return len(claims)

    # The pipelined loop

    async def run(self) -> None:
        writer = asyncio.create_task(self._writer())
        try:
            await self._claimer()
        finally:
            # Graceful stop: in-flight sends get ``grace`` seconds to finish and have their results written;
            # the rest are cancelled and, their leases running out, sent again later (at least once).
            self._stopping = True
            if self._tasks:
                _done, late = await asyncio.wait(list(self._tasks), timeout=self._grace)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
            self._results_ready.set()
            await writer

    async def stop(self, grace: float = 5.0) -> None:
        self._grace = grace
        self._stopping = True
        self._wake.set()
        self._capacity.set()

    async def _claimer(self) -> None:
        cfg = self.config
        while not self._stopping:
            room = cfg.concurrency - self._inflight
            if room < min(cfg.batch_size, cfg.concurrency) // 4:
                self._capacity.clear()
                await self._capacity.wait()
                continue
            now = self.clock.now()
            self._wake.clear()
            try:
                claims = await self.repo.claim_due(
                    now,
                    min(room, cfg.batch_size),
                    now + dt.timedelta(seconds=cfg.lease_seconds),
                    self.owner,
                )
            except Exception:
                log.exception("claiming due deliveries failed; retrying")
                await self._sleep(1.0)
                continue
            for claim in claims:
                self._inflight += 1
                task = asyncio.create_task(self._one(claim))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if len(claims) >= min(room, cfg.batch_size):
                continue  # more may be due: claim again straight away
            if claims:
                await asyncio.sleep(0)
            await self._idle(now, claimed=bool(claims))

    async def _idle(self, now: dt.datetime, claimed: bool) -> None:
        wait = self.config.poll_seconds
        try:
            due = await self.repo.next_due()
        except Exception:
            due = None
        if due is not None:
            wait = min(wait, max(0.0, (due - now).total_seconds()))
            if not claimed:
                # Due rows we could not claim are locked by another process: don't spin on them.
                wait = max(wait, 0.01)
        if wait <= 0:
            return
        await self._sleep(wait)

    async def _sleep(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _one(self, claim: Claim) -> None:
        try:
            outcome = await self._attempt(claim)
        except Exception:
            log.exception("delivery crashed", extra={"delivery_id": claim.delivery.id})
            self._inflight -= 1
            self._capacity.set()
            return  # the lease runs out and the delivery is claimed again
        self._results.append(outcome)
        self._results_ready.set()

    async def _writer(self) -> None:
        while True:
            await self._results_ready.wait()
            self._results_ready.clear()
            if not self._results:
                if self._stopping:
                    return
                continue
            if not self._stopping and len(self._results) < min(32, self._inflight):
                await asyncio.sleep(GROUP_COMMIT_WAIT)  # let a few more results join this commit
            # Group commit: every result that arrived meanwhile, in one transaction.
            batch, self._results = self._results, []
            try:
                await self._write(batch)
            except Exception:
                log.exception("writing %d delivery results failed; their leases will run out", len(batch))
            self._inflight -= len(batch)
            self._capacity.set()
            if self._results or self._stopping:
                self._results_ready.set()

"""The delivery worker: claims due deliveries in batches, sends them, writes results in batches.

Sending goes through the endpoint type's destination (``webhookd._destinations``): for http an injected
``httpx.AsyncClient`` (keep-alive pool, SSRF-guarded transport in production, ``httpx.MockTransport`` in
unit tests), for amqp and nats the broker publishers; every time comes from the injected clock.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from svckit.clock import Clock
from svckit.idlewait import idle_wait
from svckit.ids import new_id
from svckit.outage import OutageLog
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd import _metrics as metrics
from webhookd._admission import (
    Budgets,
    Counts,
    Key,
    Skips,
    Verdict,
    admit,
    covers,
    may_go_slow,
    skips,
)
from webhookd._breaker import UNANSWERED, Breaker, Breakers, State
from webhookd._breaker import Settings as BreakerSettings
from webhookd._breaker import Verdict as Gate
from webhookd._claim_walks import EVERY_ROW, Walked, walk_from, walked
from webhookd._content import body_for
from webhookd._destinations import Destinations, destinations_of
from webhookd._events import TEST_EVENT_KIND
from webhookd._outcome import decide, unclaimed
from webhookd._proven import Proven
from webhookd._queue import Queue
from webhookd._repository import Alert, Claim, DeliveryResult
from webhookd._sender import Sender
from webhookd._times import us

log = logging.getLogger("webhookd.delivery")
# The database down fails every storage cycle: one line per 10 s with a count (svckit.outage).
OUTAGES = OutageLog(log)


@dataclass
class WorkerConfig:
    """The worker's budgets, each stated once here (``webhookd._admission``, docs/webhooks.md "Isolation")."""

    batch_size: int = 200
    concurrency: int = 64  # live sends in flight
    sandbox_concurrency: int = 8  # sandbox sends in flight: a pool of its own, never taken from live
    per_endpoint: int = 8  # sends in flight to any one endpoint
    account_share: float = 0.5  # the most of an environment's pool one account holds
    retry_share: float = 0.5  # the most of an environment's pool retries hold (first attempts keep the rest)
    probation_share: float = 0.5  # the most of an account's share unproven endpoints hold (``_admission``)
    slow_after: float = 1.0  # seconds a send runs before it is slow and leaves its pool slot
    slow_sends: int = 256  # the most slow sends out of each environment's pool (an account: its share)
    proven_endpoints: int = 10_000  # endpoints remembered as answering in time (the oldest forgotten)
    lease_seconds: float = 60.0
    poll_seconds: float = 0.25
    # The longest wait of a worker with nothing due (each empty look doubles it from ``poll_seconds``,
    # ``svckit.idlewait``): a publish, recover or notice in this process wakes it at once, and the next due
    # time (a retry, a lease running out) ends it, so this bounds only another process's new deliveries.
    idle_max_seconds: float = 5.0
    breaker_threshold: int = 5  # consecutive sends with no HTTP response that open an endpoint's breaker
    breaker_interval: float = 30.0  # seconds between probes of an open breaker (``webhookd._breaker``)

    def breaker_settings(self) -> BreakerSettings:
        return BreakerSettings(self.breaker_threshold, dt.timedelta(seconds=self.breaker_interval))

    def budgets(self) -> Budgets:
        return Budgets(
            live=self.concurrency,
            sandbox=self.sandbox_concurrency,
            per_endpoint=self.per_endpoint,
            account_share=self.account_share,
            retry_share=self.retry_share,
            slow=self.slow_sends,
            probation_share=self.probation_share,
        )


def key_of(claim: Claim, proven: bool = True) -> Key:
    d = claim.delivery
    return Key(str(d.environment), d.account_id, d.endpoint_id, d.attempt_count > 0, proven)


class DeliveryWorker:
    def __init__(
        self,
        queue: Queue,
        sender: Sender | Destinations,
        clock: Clock,
        config: WorkerConfig | None = None,
        *,
        owner: str | None = None,
        on_alerts: Callable[[list[Alert]], None] | None = None,
        on_sent: Callable[[Claim, float], None] | None = None,
        on_notices: Callable[[], None] | None = None,
    ) -> None:
        self.queue = queue
        self.destinations = destinations_of(sender)
        self.sender = self.destinations.sender
        self.clock = clock
        self.config = config or WorkerConfig()
        self.owner = owner or new_id("wrk")
        self.on_alerts = on_alerts
        self.on_sent = on_sent
        self.on_notices = on_notices  # results written that may have left operational events to publish
        self._wake = asyncio.Event()
        self._results: list[DeliveryResult] = []  # sent, waiting for the next group commit
        self._budgets = self.config.budgets()
        self.breakers = Breakers(self.config.breaker_settings())
        # Claimed, waiting for a send slot, in claim order (only live claims wait for their pool: a sandbox
        # claim whose pool is full is deferred, so it never keeps live claims out of this queue).
        self._ready: collections.deque[Claim] = collections.deque()
        # Claimed, held back by a cap of their own (endpoint, account, retries, the sandbox pool): by
        # endpoint, each with when it was claimed; handed back to the queue unsent if held half a lease.
        self._deferred: collections.OrderedDict[str, collections.deque[tuple[Claim, dt.datetime]]] = (
            collections.OrderedDict()
        )
        self._inflight = Counts()  # sends in flight
        self._held = Counts()  # every claim held: in flight, ready or deferred
        self._keys: dict[int, Key] = {}  # by id(claim), each claim held: fixed when it was claimed
        self.proven = Proven(self.config.proven_endpoints)
        self._sending = 0
        self._running: dict[int, tuple[Key, float]] = {}  # sends in flight by token: key, start (monotonic)
        self._slow: set[int] = set()  # tokens of the sends marked slow
        self._tokens = itertools.count()
        # The skips of the last claim that found nothing, and until when (monotonic) the same claim is not
        # run again (each would walk the skipped backlog): ``poll_seconds``, or less when a delivery comes
        # due sooner (``_quiet_until``), unless something is published.
        self._found_nothing: tuple[Skips, float] | None = None
        # The last full walk of the due rows that left some (``webhookd._claim_walks``): claims that skip as
        # much look only at what came due since, until its ``next_full``.
        self._walked: Walked | None = None
        # Ordering keys whose delivery a result since the last cycle finished: the next claim takes the next
        # delivery of each by name (``Skips.freed``), since it may be due before the last full walk's time.
        self._freed: list[tuple[str, str]] = []
        self._empty = 0  # idle looks in a row that claimed nothing with nothing due (``_idle``)
        self._stopping = False
        self._grace = 5.0
        self._tasks: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Something became due now (a publish, a recover): claim without waiting for the poll."""
        self._found_nothing = None
        self._empty = 0
        self._wake.set()

    # One claimed delivery

    async def _attempt(self, claim: Claim) -> DeliveryResult:
        ep = claim.endpoint
        now = self.clock.now()
        if ep is None or ep.status != EndpointStatus.ENABLED:
            return decide(claim, None, now)
        if not self.destinations.pushes(ep):
            return self.destinations.pulled(claim, now)  # polling: nobody is sent anything
        breakers = self.breakers
        probe = False
        if breakers.tracked(ep.id) and claim.delivery.event_type != TEST_EVENT_KIND:
            gate = breakers.admit(ep.id, now)
            if gate.verdict is Gate.WAIT:
                return unclaimed(claim)  # still due; claims skip the endpoint until its next probe
            probe = gate.verdict is Gate.PROBE
        due = claim.delivery.next_attempt_at
        if due is not None:
            lag = max(0.0, (now - due).total_seconds())
            metrics.LAG.observe(lag)
            if self.on_sent is not None:
                self.on_sent(claim, lag)
        sent = await self.destinations.send(ep, body_for(ep, claim.envelope), claim.delivery.event_id, now)
        if sent.result in UNANSWERED or breakers.tracked(ep.id):
            before = breakers.state(ep.id)
            self._breaker_moved(ep.id, before, breakers.record(ep.id, sent.result, self.clock.now()), probe)
        outcome = decide(claim, sent, now)
        if outcome.status != DeliveryStatus.SUCCEEDED:
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

    @staticmethod
    def _breaker_moved(endpoint_id: str, before: Breaker, after: Breaker, probe: bool) -> None:
        if before.state is not after.state and (
            after.state is State.OPEN or before.state is not State.CLOSED
        ):
            log.warning(
                "endpoint circuit breaker %s",
                "opened: its due deliveries wait for a probe" if after.state is State.OPEN else "closed",
                extra={"endpoint_id": endpoint_id, "failures": after.failures, "probe": probe},
            )

    def _noticed(self, results: list[DeliveryResult]) -> None:
        if self.on_notices is not None and any(
            r.failing_level or r.recovered or r.exhausted for r in results
        ):
            self.on_notices()

    def _alerted(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            metrics.ENDPOINTS_DISABLED.inc()
            log.warning(
                "endpoint disabled (its last retry failed, or it answered 410 Gone)",
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
        claims = await self.queue.claim_due(
            now,
            limit or self.config.batch_size,
            now + dt.timedelta(seconds=self.config.lease_seconds),
            self.owner,
        )
        if not claims:
            return 0
        outcomes = list(await asyncio.gather(*(self._attempt(c) for c in claims)))
        self._alerted(await self.queue.record_outcomes(outcomes, self.owner, self.clock.now()))
        self._noticed(outcomes)
        return len(claims)

    # The pipelined loop. One cycle = one storage round trip that commits every result finished since the
    # last cycle (group commit) and claims due deliveries into a ready queue one cycle ahead of the send
    # slots, so sends never wait for storage and storage never waits for sends; batches grow with load.

    async def run(self) -> None:
        try:
            await self._cycles()
        finally:
            # Graceful stop: in-flight sends get ``grace`` seconds to finish and have their results written;
            # the rest are cancelled and handed back with the claims that never started, due as they were,
            # so another process sends them at once (at least once: a receiver may have had one already).
            self._stopping = True
            unsent = [unclaimed(c) for c in self._waiting()]
            self._ready.clear()
            self._deferred.clear()
            self._keys.clear()
            if self._tasks:
                _done, late = await asyncio.wait(list(self._tasks), timeout=self._grace)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
            batch, self._results = self._results + unsent, []
            if batch:
                try:
                    self._alerted(await self.queue.record_outcomes(batch, self.owner, self.clock.now()))
                    self._noticed(batch)
                except Exception as exc:
                    if OUTAGES.count(exc) is None:
                        log.exception(
                            "writing %d delivery results failed; their leases will run out", len(batch)
                        )

    async def stop(self, grace: float = 5.0) -> None:
        self._grace = grace
        self._stopping = True
        self._wake.set()

    async def _cycles(self) -> None:
        cfg = self.config
        ahead = 2 * cfg.concurrency  # sending + waiting
        low_water = max(1, min(cfg.batch_size, cfg.concurrency) // 4)
        while not self._stopping:
            self._results.extend(self._hand_back(self.clock.now()))
            if self._mark_slow():
                self._start_sends()
            held = sum(self._held.env.values()) - sum(self._held.slow_env.values())  # slow ones left
            room = ahead - held
            limit = min(room, cfg.batch_size) if room >= low_water else 0
            if not limit and self._deferred and held < 2 * ahead:
                # What waits is held back by its own caps: claim a little past it (the claim skips what
                # already has its fill), so others' deliveries behind it are reached.
                limit = low_water
            if not self._results and not limit:
                # Send slots and the ready queue are full: wait for a result (a publish's wake is no use
                # until then).
                self._wake.clear()
                await self._sleep(cfg.poll_seconds)
                continue
            batch, self._results = self._results, []
            now = self.clock.now()
            self._wake.clear()
            skipped = (
                skips(self._held, self._budgets, self.breakers.waiting(now), self.proven.by_account)
                if limit
                else Skips()
            )
            if limit and skipped and self._found_nothing is not None and not self._freed:
                same, until = self._found_nothing
                quiet = until - time.monotonic()
                if covers(skipped, same) and quiet > 0:
                    limit = 0  # the same claim found nothing a moment ago: only write the results
                    if not batch:
                        await self._sleep(quiet)
                        continue
            started = time.monotonic()
            walk = walk_from(self._walked, skipped, started) if limit else EVERY_ROW
            if limit and (walk != EVERY_ROW or self._freed):
                skipped = dataclasses.replace(skipped, after=walk, freed=tuple(self._freed))
                self._freed = []
            try:
                alerts, claims = await self.queue.record_and_claim(
                    batch, self.owner, now, limit, now + dt.timedelta(seconds=cfg.lease_seconds), skipped
                )
            except Exception as exc:
                if OUTAGES.count(exc) is None:  # an outage: one summary line per 10 s, no traceback
                    log.exception(
                        "storage cycle failed (%d results not written, their leases will run out); retrying",
                        len(batch),
                    )
                await self._sleep(1.0)
                continue
            self._alerted(alerts)
            self._noticed(batch)
            if limit and walk == EVERY_ROW:
                took = time.monotonic() - started
                left = len(claims) < limit
                self._walked = walked(skipped, us(now), started, took, cfg.poll_seconds) if left else None
            if limit:
                if skipped and not claims:
                    self._found_nothing = (skipped, await self._quiet_until(now))
                elif claims and self._found_nothing is not None and covers(skipped, self._found_nothing[0]):
                    self._found_nothing = None  # it skipped as much and found some: something came due
            for claim in claims:
                key = key_of(claim, claim.delivery.endpoint_id in self.proven)
                self._keys[id(claim)] = key
                self._held.add(key)
            self._ready.extend(claims)
            self._start_sends()
            if batch or (limit and len(claims) >= limit):
                await asyncio.sleep(0)  # let the new sends start, then the next cycle
                continue
            if limit:
                await self._idle(now, claimed=bool(claims), skipping=bool(skipped))

    async def _quiet_until(self, now: dt.datetime) -> float:
        """Until when (monotonic) a claim with the same skips is not run again: a poll, or until the next
        delivery comes due if sooner (else deliveries due while a backlog is skipped wait a poll)."""
        wait = self.config.poll_seconds
        try:
            due = await self.queue.next_due_after(now)
        except Exception as exc:  # the poll interval stands in for the unknown due time
            due = None
            if OUTAGES.count(exc) is None:  # an outage: one summary line per 10 s (svckit.outage)
                log.exception("reading when the next delivery is due failed; polling instead")
        if due is not None:
            wait = min(wait, max(0.0, (due - self.clock.now()).total_seconds()))
        return time.monotonic() + wait

    def _waiting(self) -> list[Claim]:
        """Every claim held and not sending."""
        out = list(self._ready)
        out.extend(c for deferred in self._deferred.values() for c, _at in deferred)
        return out

    def _hand_back(self, now: dt.datetime) -> list[DeliveryResult]:
        """Deferred claims go back to the queue unsent, due when they were due, when held half a lease or
        when their endpoint has a slow send (it hangs: they would only keep their account's share), to be
        claimed again when their endpoint, account or pool has room; never lost, never sent twice."""
        if not self._deferred:
            return []
        oldest = now - dt.timedelta(seconds=self.config.lease_seconds / 2)
        hanging = self._inflight.slow_endpoint
        out: list[DeliveryResult] = []
        for endpoint_id in list(self._deferred):
            deferred = self._deferred[endpoint_id]
            full = hanging[endpoint_id] > 0
            while deferred and (full or deferred[0][1] <= oldest):
                claim, _at = deferred.popleft()
                self._held.remove(self._keys.pop(id(claim)))
                out.append(unclaimed(claim))
            if not deferred:
                del self._deferred[endpoint_id]
        if out:
            self._walked = None  # they are due again as they were: before the last full walk's time
        return out

    def _mark_slow(self) -> bool:
        """Sends running past ``slow_after`` leave their pool slot (while the slow budget has room)."""
        edge = time.monotonic() - self.config.slow_after
        marked = False
        for token, (key, started) in self._running.items():
            if started > edge or token in self._slow:
                continue
            if not may_go_slow(key, self._inflight, self._budgets):
                continue
            self.proven.forget(key.endpoint)  # it hangs: its next sends are in probation
            self._slow.add(token)
            self._inflight.mark_slow(key)
            self._held.mark_slow(key)
            marked = True
        return marked

    def _pick(self) -> tuple[Claim, Key, int] | None:
        """The next claim allowed to send now (``webhookd._admission.admit``), counted in flight: deferred
        claims first, of the endpoint with the fewest sends in flight (a healthy endpoint's sends finish at
        once, so it goes before the ones that hang), then the ready queue in order; a ready claim held back
        by a cap of its own is moved to the deferred."""
        best: tuple[int, str, Key] | None = None
        for endpoint_id, deferred in self._deferred.items():
            key = self._keys[id(deferred[0][0])]
            busy = self._inflight.endpoint[endpoint_id]
            if (best is None or busy < best[0]) and admit(key, self._inflight, self._budgets) is Verdict.SEND:
                best = (busy, endpoint_id, key)
                if busy == 0:
                    break
        if best is not None:
            _busy, endpoint_id, key = best
            deferred = self._deferred[endpoint_id]
            claim, _at = deferred.popleft()
            if deferred:
                self._deferred.move_to_end(endpoint_id)
            else:
                del self._deferred[endpoint_id]
            return self._started(key, claim)
        now: dt.datetime | None = None
        ready = self._ready
        while ready:
            claim = ready[0]
            key = self._keys[id(claim)]
            verdict = admit(key, self._inflight, self._budgets)
            if verdict is Verdict.WAIT:
                return None
            ready.popleft()
            if verdict is Verdict.SEND:
                return self._started(key, claim)
            now = now or self.clock.now()
            self._deferred.setdefault(key.endpoint, collections.deque()).append((claim, now))
        return None

    def _started(self, key: Key, claim: Claim) -> tuple[Claim, Key, int]:
        self._inflight.add(key)
        self._sending += 1
        token = next(self._tokens)
        self._running[token] = (key, time.monotonic())
        return claim, key, token

    def _start_sends(self) -> None:
        """Start every claim admission allows; a slot's task goes on with the next one until none is left."""
        while not self._stopping:
            picked = self._pick()
            if picked is None:
                return
            task = asyncio.create_task(self._slot(*picked))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _idle(self, now: dt.datetime, claimed: bool, skipping: bool = False) -> None:
        nothing_due = not claimed
        try:
            due = await self.queue.next_due()
        except Exception as exc:  # the poll interval stands in for the unknown due time
            due, nothing_due = None, False
            if OUTAGES.count(exc) is None:  # an outage: one summary line per 10 s (svckit.outage)
                log.exception("reading when the next delivery is due failed; polling instead")
        if due is not None and due <= now:
            nothing_due = False
        # Nothing claimed and nothing due now: each such look in a row waits longer (``idle_max_seconds``).
        self._empty = self._empty + 1 if nothing_due else 0
        wait = idle_wait(self._empty, self.config.poll_seconds, self.config.idle_max_seconds)
        if due is not None:
            until_due = (due - now).total_seconds()
            if until_due > 0:
                wait = min(wait, until_due)
            elif not claimed and skipping:
                # Due rows we skipped wait for room here (a finished send wakes us), others' until they
                # come due (``_quiet_until``).
                if self._found_nothing is not None:
                    wait = min(wait, max(0.0, self._found_nothing[1] - time.monotonic()))
            elif not claimed:
                # Due rows we could not claim are locked by another process: don't spin on them.
                wait = min(wait, 0.01)
            else:
                wait = 0.0
        if wait <= 0:
            return
        await self._sleep(wait)

    async def _sleep(self, seconds: float) -> None:
        """Until ``seconds`` pass, something becomes due now (``wake``) or a send finishes."""
        if self._wake.is_set():
            return
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _slot(self, claim: Claim, key: Key, token: int) -> None:
        while True:
            try:
                outcome = await self._attempt(claim)
                # Not ``self._results.append(await ...)``: a cycle may swap the list during the await.
                self._results.append(outcome)
                ordering = claim.delivery.ordering_key
                if ordering is not None and outcome.status != DeliveryStatus.PENDING:
                    self._freed.append((claim.delivery.endpoint_id, ordering))
                if outcome.attempt is not None:  # slow or not: its next sends in probation or not
                    took = -1.0 if token in self._slow else time.monotonic() - self._running[token][1]
                    self.proven.answered(key, outcome.attempt.response_status, took, self.config.slow_after)
            except asyncio.CancelledError:
                if self._stopping:  # cut by a graceful stop: handed back, so another process sends it now
                    self._results.append(unclaimed(claim))
                raise
            except Exception:
                # The lease runs out and the delivery is claimed again.
                log.exception("delivery crashed", extra={"delivery_id": claim.delivery.id})
            finally:
                del self._running[token]
                if token in self._slow:
                    self._slow.discard(token)
                    self._inflight.unmark_slow(key)
                    self._held.unmark_slow(key)
                self._inflight.remove(key)
                self._held.remove(key)
                self._keys.pop(id(claim), None)
                self._sending -= 1
                self._wake.set()
            if self._stopping:
                return
            picked = self._pick()
            if picked is None:
                return
            claim, key, token = picked

"""The travel.webhooks.v1.WebhookService servicer: validates input, calls the repository, wakes the worker.

Every check runs before anything is written, so a refused call changes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from svckit import tracing
from svckit.catalog import webhook_test
from svckit.clock import Clock
from svckit.durations import CLOCK_ADVANCE_MAX, CLOCK_ADVANCE_MIN
from svckit.eventcheck import event_problem, resolve_state
from svckit.events import MODE_ONLY, SANDBOX_DATA_MAX_BYTES, data_bytes, mode_refusal
from svckit.ids import new_id, sortable_id
from svckit.peers import identity_of, publish_refusal, refuse
from svckit.protos import struct_to_dict
from svckit.signing import new_secret
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import _convert as cv
from webhookd._content import body_for
from webhookd._delivery import DeliveryWorker
from webhookd._destinations import Destinations, destinations_of
from webhookd._ed25519 import new_signing_key
from webhookd._endpoint_cap import MAX_ENDPOINTS
from webhookd._errors import (
    Conflict,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
)
from webhookd._events import (
    EVENT_KINDS,
    SANDBOX_EVENTS_PER_DAY,
    TEST_EVENT_KIND,
    Environment,
    build_envelope,
)
from webhookd._metrics import EVENTS_REFUSED
from webhookd._outcome import decide
from webhookd._receiver_auth_pb import receiver_auth_of
from webhookd._repository import (
    IDEMPOTENCY_WINDOW,
    DeliveryRecord,
    EndpointRecord,
    EventRecord,
    IdempotencyRecord,
    Repository,
    SigningSecret,
)
from webhookd._sender import Sender
from webhookd._service_counts import DeliveryCountReads
from webhookd._service_deliveries import DeliveryReads
from webhookd._service_destinations import DESTINATION_PATHS, registered, updated
from webhookd._service_event_counts import EventCounts
from webhookd._service_events import EventHub, EventReads
from webhookd._service_keys import SigningKeyReads
from webhookd._service_poll import PollCalls, is_polling
from webhookd._service_probes import ProbeRpcs
from webhookd._ssrf import Policy, Resolver, system_resolver
from webhookd._subscriptions import needs_mode, subscription
from webhookd._traffic_mail import event_alert

log = logging.getLogger("webhookd.service")

DEFAULT_OVERLAP = dt.timedelta(hours=24)
MAX_OVERLAP = dt.timedelta(days=7)
MAX_IDEMPOTENCY_KEY = 255
UPDATABLE = (
    "events",
    "description",
    "signature_scheme",
    "ordering",
    "filter_json",
    "payload",
    *DESTINATION_PATHS,
    "receiver_auth",
)


def check_idempotency_key(key: str) -> None:
    if len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise InvalidRequest(f"idempotency_key: at most {MAX_IDEMPOTENCY_KEY} printable characters")


class WebhookService(
    EventReads,
    DeliveryReads,
    DeliveryCountReads,
    SigningKeyReads,
    PollCalls,
    EventCounts,
    ProbeRpcs,
    webhooks_pb2_grpc.WebhookServiceServicer,
):
    def __init__(
        self,
        repo: Repository,
        clock: Clock,
        sender: Sender | Destinations,
        *,
        policy: Policy | None = None,
        resolver: Resolver = system_resolver,
        worker: DeliveryWorker | None = None,
        hub: EventHub | None = None,
        account_mode: Callable[[str], Awaitable[str]] | None = None,
        max_endpoints: int = MAX_ENDPOINTS,
    ) -> None:
        self.repo = repo
        self.clock = clock
        self.destinations = destinations_of(sender)  # the http sender, and the brokers' when configured
        self.policy = policy or Policy()
        self.resolver = resolver
        self.worker = worker
        self.hub = hub or EventHub()
        # "A"/"B" of an account, from authsvc; None (no --authsvc): the mode-only kinds are not checked.
        self.account_mode = account_mode
        # Endpoints an account may have per environment (webhookd._endpoint_cap; --max-endpoints).
        self.max_endpoints = max_endpoints
        # Wakes the mailer when an alert was stored here (a leaked key's: webhookd._leak_alerts).
        self.on_alerts: Callable[[], None] = lambda: None

    def _wake(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    async def _endpoint(self, request: Any) -> EndpointRecord:
        account_id, env = cv.scope(request)
        endpoint_id = cv.identifier(request.endpoint_id, "endpoint_id")
        found = await self.repo.get_endpoint(account_id, env, endpoint_id)
        if found is None:
            raise NotFound(f"endpoint_id: no endpoint {endpoint_id} in this account and environment")
        return found

    # Idempotency of registrations and rotations: a retry with the caller's key after it lost the answer
    # (the edge died after this call) gets the same endpoint and its current secret, not a second one.

    @staticmethod
    def _idempotency(request: Any, now: dt.datetime) -> IdempotencyRecord | None:
        key = request.idempotency_key
        if not key:
            return None
        check_idempotency_key(key)
        unkeyed = type(request)()
        unkeyed.CopyFrom(request)
        unkeyed.ClearField("idempotency_key")
        digest = hashlib.sha256(type(request).__name__.encode() + b"\n")
        digest.update(unkeyed.SerializeToString(deterministic=True))
        return IdempotencyRecord(key, digest.hexdigest(), now)

    async def _replay(
        self, account_id: str, env: str, idem: IdempotencyRecord | None
    ) -> EndpointRecord | None:
        """The endpoint an earlier call with this key created or rotated, or None: run the call."""
        if idem is None:
            return None
        found = await self.repo.find_idempotent(
            account_id, env, idem.key, idem.created_at - IDEMPOTENCY_WINDOW
        )
        if found is None:
            return None
        request_hash, endpoint_id = found
        if request_hash != idem.request_hash:
            raise IdempotencyKeyReused(
                "idempotency_key: already used for a different request in the last 24 hours; use a new key"
            )
        endpoint = await self.repo.get_endpoint(account_id, env, endpoint_id)
        if endpoint is None:
            raise Conflict(f"idempotency_key: the endpoint {endpoint_id} this key was used on was deleted")
        log.info("idempotent call replayed", extra={"endpoint_id": endpoint_id, "account_id": account_id})
        return endpoint

    async def _raced(self, account_id: str, env: str, idem: IdempotencyRecord | None) -> EndpointRecord:
        """A concurrent call with the same key wrote first: answer with what it wrote."""
        endpoint = await self._replay(account_id, env, idem)
        if endpoint is None:
            raise Conflict("idempotency_key: a concurrent request with this key did not settle; retry")
        return endpoint

    # Endpoints

    async def _subscription(self, account_id: str, kinds: Sequence[str]) -> list[str]:
        """The checked kinds to store (``webhookd._subscriptions``); the account's mode is asked only
        when a mode-only kind is named."""
        mode = ""
        if self.account_mode is not None and needs_mode(kinds):
            mode = await self.account_mode(account_id)
        return subscription(kinds, mode)

    async def RegisterEndpoint(
        self, request: pb.RegisterEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterEndpointResponse:
        account_id, env = cv.scope(request)
        now = self.clock.now()
        idem = self._idempotency(request, now)
        replayed = await self._replay(account_id, env, idem)
        if replayed is not None:
            return pb.RegisterEndpointResponse(
                endpoint=cv.endpoint_pb(replayed, now), signing_secret=replayed.secrets[0].secret
            )
        kinds = await self._subscription(account_id, request.events)
        desc = cv.description(request.description)
        scheme = cv.signature_scheme(request.signature_scheme)
        order = cv.ordering(request.ordering)
        flt, payload = cv.content_filter(request.filter_json), cv.payload(request.payload)
        destination = await registered(request, self.policy, self.resolver)
        secret = new_secret()
        endpoint = EndpointRecord(
            id=new_id("we"),
            account_id=account_id,
            environment=env,
            events=kinds,
            description=desc,
            status=EndpointStatus.ENABLED,
            disabled_reason="",
            created_at=now,
            updated_at=now,
            secrets=[SigningSecret(secret, signing_key=new_signing_key())],
            signature_scheme=scheme,
            ordering=order,
            filter=flt,
            payload=payload,
            **destination,
        )
        endpoint.receiver_auth = await receiver_auth_of(self, request, endpoint)
        if not await self.repo.create_endpoint(endpoint, idem, self.max_endpoints):
            endpoint = await self._raced(account_id, env, idem)
            secret = endpoint.secrets[0].secret
        log.info(
            "endpoint registered", extra={"endpoint_id": endpoint.id, "account_id": account_id, "env": env}
        )
        return pb.RegisterEndpointResponse(endpoint=cv.endpoint_pb(endpoint, now), signing_secret=secret)

    async def GetEndpoint(
        self, request: pb.GetEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetEndpointResponse:
        return pb.GetEndpointResponse(
            endpoint=cv.endpoint_pb(await self._endpoint(request), self.clock.now())
        )

    async def ListEndpoints(
        self, request: pb.ListEndpointsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEndpointsResponse:
        account_id, env = cv.scope(request)
        size = cv.page_size(request.page_size)
        after = cv.parse_page_token(request.page_token)
        rows = await self.repo.list_endpoints(account_id, env, size + 1, after)
        now = self.clock.now()
        token = cv.page_token(rows[size - 1].created_at, rows[size - 1].id) if len(rows) > size else ""
        return pb.ListEndpointsResponse(
            endpoints=[cv.endpoint_pb(e, now) for e in rows[:size]], next_page_token=token
        )

    async def UpdateEndpoint(
        self, request: pb.UpdateEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateEndpointResponse:
        paths = cv.update_paths(request.update_mask.paths, UPDATABLE)
        endpoint = await self._endpoint(request)
        changes: dict[str, Any] = {}
        if "events" in paths:
            changes["events"] = await self._subscription(endpoint.account_id, request.events)
        if "description" in paths:
            changes["description"] = cv.description(request.description)
        if "signature_scheme" in paths:
            changes["signature_scheme"] = cv.signature_scheme(request.signature_scheme)
        if "ordering" in paths:
            changes["ordering"] = cv.ordering(request.ordering)
        if "filter_json" in paths:
            changes["filter"] = cv.content_filter(request.filter_json)
            changes["filter_updated_at"] = self.clock.now()
        if "payload" in paths:
            changes["payload"] = cv.payload(request.payload)
        changes.update(await updated(request, paths, endpoint, self.policy, self.resolver))
        if "receiver_auth" in paths:
            changes["receiver_auth"] = await receiver_auth_of(
                self, request, endpoint, changes.get("destination_type"), update=True
            )
        now = self.clock.now()
        for key, value in changes.items():
            setattr(endpoint, key, value)
        endpoint.updated_at = now
        await self.repo.save_endpoint(endpoint)
        log.info("endpoint updated", extra={"endpoint_id": endpoint.id, "fields": sorted(changes)})
        return pb.UpdateEndpointResponse(endpoint=cv.endpoint_pb(endpoint, now))

    async def DeleteEndpoint(
        self, request: pb.DeleteEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteEndpointResponse:
        endpoint = await self._endpoint(request)
        now = self.clock.now()
        await self.repo.delete_endpoint(endpoint, now)
        log.info("endpoint deleted", extra={"endpoint_id": endpoint.id})
        return pb.DeleteEndpointResponse(endpoint=cv.endpoint_pb(endpoint, now))

    async def EnableEndpoint(
        self, request: pb.EnableEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnableEndpointResponse:
        endpoint = await self._endpoint(request)
        now = self.clock.now()
        if endpoint.status != EndpointStatus.ENABLED:
            endpoint.status, endpoint.disabled_reason, endpoint.updated_at = EndpointStatus.ENABLED, "", now
            await self.repo.save_endpoint(endpoint)
            log.info("endpoint enabled", extra={"endpoint_id": endpoint.id})
        return pb.EnableEndpointResponse(endpoint=cv.endpoint_pb(endpoint, now))

    async def RotateSigningSecret(
        self, request: pb.RotateSigningSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.RotateSigningSecretResponse:
        overlap = DEFAULT_OVERLAP
        if request.HasField("overlap"):
            overlap = request.overlap.ToTimedelta()
            if overlap < dt.timedelta(0) or overlap > MAX_OVERLAP:
                raise InvalidRequest("overlap: must be between 0 and 7 days")
        now = self.clock.now()
        account_id, env = cv.scope(request)
        idem = self._idempotency(request, now)
        replayed = await self._replay(account_id, env, idem)
        if replayed is not None:
            return pb.RotateSigningSecretResponse(
                endpoint=cv.endpoint_pb(replayed, now), signing_secret=replayed.secrets[0].secret
            )
        endpoint = await self._endpoint(request)
        secret = new_secret()
        kept = [SigningSecret(secret, signing_key=new_signing_key())]
        for old in endpoint.secrets:
            expires = now + overlap if old.expires_at is None else min(old.expires_at, now + overlap)
            if expires > now:
                kept.append(SigningSecret(old.secret, expires, old.signing_key))
        endpoint.secrets, endpoint.updated_at = kept, now
        if not await self.repo.save_endpoint(endpoint, idem):
            endpoint = await self._raced(account_id, env, idem)
            secret = endpoint.secrets[0].secret
        log.info(
            "signing secret rotated",
            extra={
                "endpoint_id": endpoint.id,
                "overlap_seconds": overlap.total_seconds(),
                "valid": len(kept),
            },
        )
        return pb.RotateSigningSecretResponse(endpoint=cv.endpoint_pb(endpoint, now), signing_secret=secret)

    async def SendTestEvent(
        self, request: pb.SendTestEventRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendTestEventResponse:
        endpoint = await self._endpoint(request)
        if endpoint.status == EndpointStatus.DISABLED:
            raise Conflict("endpoint_id: the endpoint is disabled; enable it before sending a test event")
        now = self.clock.now()
        event_id = sortable_id("evt", now)
        data = webhook_test(endpoint.id)
        envelope = build_envelope(
            event_id=event_id,
            kind=TEST_EVENT_KIND,
            created=now,
            environment=Environment(endpoint.environment),
            account_id=endpoint.account_id,
            state="test",
            data=data,
        )
        event = EventRecord(
            event_id, endpoint.account_id, endpoint.environment, TEST_EVENT_KIND, "test", now, envelope
        )
        delivery = DeliveryRecord(
            id=sortable_id("msg", now),
            event_id=event_id,
            endpoint_id=endpoint.id,
            account_id=endpoint.account_id,
            environment=endpoint.environment,
            event_type=TEST_EVENT_KIND,
            status=DeliveryStatus.PENDING,
            attempt_count=0,
            schedule_count=0,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
            polled=is_polling(endpoint),
        )
        await self.repo.create_test_delivery(event, delivery)
        self._wake()
        log.info(
            "test event queued",
            extra={"event_id": event_id, "endpoint_id": endpoint.id, "delivery_id": delivery.id},
        )
        return pb.SendTestEventResponse(event=cv.event_pb(event), delivery=cv.delivery_pb(delivery))

    # Events

    async def PublishEvent(
        self, request: pb.PublishEventRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishEventResponse:
        account_id, env = cv.scope(request)
        caller = identity_of(context)
        kind = request.type
        if kind not in EVENT_KINDS:
            self._refused(caller, "unknown_kind")
            raise InvalidRequest(
                f"type: unknown event kind {kind!r}; known kinds: {', '.join(EVENT_KINDS)}",
                metadata={"field": "type"},
            )
        data = struct_to_dict(request.data)
        # The catalog's publishers only (svckit.publishers), then an event of its kind (svckit.eventcheck).
        refused = publish_refusal(caller, kind, env, data)
        if refused is not None:
            self._refused(caller, refused.reason)
            await refuse(
                context, caller, "PublishEvent", refused.message, "forbidden", {"reason": refused.reason}
            )
        if kind in MODE_ONLY and self.account_mode is not None:
            refusal = mode_refusal(kind, await self.account_mode(account_id))
            if refusal:
                self._refused(caller, "mode")
                raise InvalidRequest(refusal, metadata={"field": "type"})
        problem = event_problem(kind, request.state, data)
        if problem is not None:
            self._refused(caller, "invalid_state" if problem.field == "state" else "invalid_data")
            raise InvalidRequest(str(problem), metadata={"field": problem.field})
        state = resolve_state(kind, request.state)  # none given: the kind's usual state
        key = request.idempotency_key
        check_idempotency_key(key)
        now = self.clock.now()
        if env == Environment.SANDBOX:
            await self._check_sandbox_bounds(account_id, data, now)
        event_id = sortable_id("evt", now)
        envelope = build_envelope(
            event_id=event_id,
            kind=request.type,
            created=now,
            environment=Environment(env),
            account_id=account_id,
            state=state,
            data=data,
        )
        event = EventRecord(event_id, account_id, env, request.type, state, now, envelope)
        # Its deliveries continue this call's trace when that is the account's own (svckit.tracing).
        tracing.remember_event(event_id, account_id, context.invocation_metadata())
        stored, count = await self.repo.publish(event, key, now)
        if stored.id == event_id:
            self._wake()
            self.hub.notify()
            log.info(
                "event published",
                extra={
                    "event_id": event_id,
                    "account_id": account_id,
                    "type": request.type,
                    "deliveries": count,
                },
            )
        alert = event_alert(account_id, env, kind, data, now)  # a leaked key's, a traffic event's
        if alert is not None and await self.repo.add_alert(alert):
            self.on_alerts()
        return pb.PublishEventResponse(event=cv.event_pb(stored), delivery_count=count)

    @staticmethod
    def _refused(caller: str, reason: str) -> None:
        EVENTS_REFUSED.labels(caller, reason).inc()

    async def _check_sandbox_bounds(self, account_id: str, data: dict[str, Any], now: dt.datetime) -> None:
        """A sandbox event's storage bounds (docs/webhooks.md "Sandbox bounds"), whoever publishes it: its
        data at most ``SANDBOX_DATA_MAX_BYTES``, the account's sandbox events of the last 24 hours fewer than
        ``SANDBOX_EVENTS_PER_DAY``. Live events are bounded by neither."""
        size = data_bytes(data)
        if size > SANDBOX_DATA_MAX_BYTES:
            raise PayloadTooLarge(f"data: {size} bytes, a sandbox event's limit is {SANDBOX_DATA_MAX_BYTES}")
        stored = await self.repo.count_events(account_id, Environment.SANDBOX, now - dt.timedelta(days=1))
        if stored >= SANDBOX_EVENTS_PER_DAY:
            raise RateLimited(
                f"this account published {stored} sandbox events in the last 24 hours, the limit is "
                f"{SANDBOX_EVENTS_PER_DAY}; older ones make room as they age"
            )

    async def ResendAttempt(
        self, request: pb.ResendAttemptRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResendAttemptResponse:
        account_id, env = cv.scope(request)
        attempt_id = cv.identifier(request.attempt_id, "attempt_id")
        attempt = await self.repo.get_attempt(account_id, env, attempt_id)
        if attempt is None:
            raise NotFound(f"attempt_id: no attempt {attempt_id} in this account and environment")
        claim = await self.repo.get_claim(attempt.delivery_id)
        if claim is None or claim.endpoint is None:
            raise Conflict("attempt_id: its endpoint was deleted; nothing to resend to")
        endpoint = claim.endpoint
        if not self.destinations.pushes(endpoint):
            raise Conflict(f"attempt_id: its endpoint is a {endpoint.destination_type} one; nothing is sent")
        now = self.clock.now()
        sent = await self.destinations.send(
            endpoint, body_for(endpoint, claim.envelope), claim.delivery.event_id, now
        )
        outcome = decide(claim, sent, now, manual=True)
        assert outcome.attempt is not None
        await self.repo.record_manual_attempt(
            outcome.attempt, outcome.status == DeliveryStatus.SUCCEEDED, now
        )
        log.info(
            "attempt resent by hand",
            extra={
                "event_id": claim.delivery.event_id,
                "endpoint_id": endpoint.id,
                "delivery_id": claim.delivery.id,
                "outcome": sent.result.value,
            },
        )
        delivery = await self.repo.get_delivery(claim.delivery.id)
        assert delivery is not None
        return pb.ResendAttemptResponse(delivery=cv.delivery_pb(delivery))

    async def RecoverEndpoint(
        self, request: pb.RecoverEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecoverEndpointResponse:
        since = cv.time_or_none(request, "since")
        endpoint = await self._endpoint(request)
        if request.dry_run:
            return pb.RecoverEndpointResponse(recovered_count=await self.repo.recoverable(endpoint, since))
        if endpoint.status != EndpointStatus.ENABLED:
            raise Conflict("endpoint_id: the endpoint is disabled; enable it before recovering events")
        count = await self.repo.recover(endpoint, since, self.clock.now())
        self._wake()
        log.info("endpoint recovered", extra={"endpoint_id": endpoint.id, "recovered": count})
        return pb.RecoverEndpointResponse(recovered_count=count)

    async def AdvanceSandboxClock(
        self, request: pb.AdvanceSandboxClockRequest, context: grpc.aio.ServicerContext
    ) -> pb.AdvanceSandboxClockResponse:
        account_id, env = cv.scope(request)
        if env != Environment.SANDBOX:
            raise InvalidRequest("environment: only ENVIRONMENT_SANDBOX has a clock to advance")
        by = cv.duration_between(request, "by", CLOCK_ADVANCE_MIN, CLOCK_ADVANCE_MAX)
        due = await self.repo.advance_sandbox(account_id, by, self.clock.now())
        self._wake()
        log.info(
            "sandbox clock advanced",
            extra={"account_id": account_id, "by_seconds": by.total_seconds(), "due": due},
        )
        return pb.AdvanceSandboxClockResponse(deliveries_due=due)

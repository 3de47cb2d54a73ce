"""The stored outcome of one claimed delivery: what a send's result makes of it (``decide``, pure: the
retry schedule, Retry-After and 410 steering, disabling, the failing levels), and a claim handed back
unsent (``unclaimed``). The worker and a manual resend both write what these answer."""

from __future__ import annotations

import datetime as dt

from svckit.ids import sortable_id
from svckit.webhook_status import DeliveryStatus
from webhookd._events import TEST_EVENT_KIND
from webhookd._health import failing_level, recovered
from webhookd._repository import AttemptRecord, Claim, DeliveryResult
from webhookd._retry import Action, next_attempt
from webhookd._sender import SendResult
from webhookd._steering import steer


def decide(
    claim: Claim, sent: SendResult | None, attempted_at: dt.datetime, manual: bool = False
) -> DeliveryResult:
    """Pure: the stored outcome of one claimed delivery (``sent`` is None when nothing was sent)."""
    d = claim.delivery
    if claim.endpoint is None:
        return DeliveryResult(d.id, d.endpoint_id, None, DeliveryStatus.FAILED, None, counts_attempt=False)
    if sent is None:
        return DeliveryResult(d.id, d.endpoint_id, None, DeliveryStatus.HELD, None, counts_attempt=False)
    attempt = AttemptRecord(
        id=sortable_id("att", attempted_at),
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
        response_headers=sent.response_headers,
        latency_ms=sent.latency_ms,
        error=sent.error,
        attempted_at=attempted_at,
        manual=manual,
    )
    decision = steer(
        next_attempt(d.schedule_count + 1, sent.result, attempted_at),
        sent.status,
        sent.response_headers,
        attempted_at,
    )
    if d.event_type == TEST_EVENT_KIND and decision.action is not Action.DONE:
        # A test send is one attempt: it reports, it never retries and never disables the endpoint.
        return DeliveryResult(d.id, d.endpoint_id, attempt, DeliveryStatus.FAILED, None, counts_attempt=True)
    if decision.action is Action.DONE:
        return DeliveryResult(
            d.id,
            d.endpoint_id,
            attempt,
            DeliveryStatus.SUCCEEDED,
            None,
            counts_attempt=True,
            recovered=recovered(claim.endpoint.failing_level, True),
        )
    if decision.action is Action.RETRY:
        return DeliveryResult(
            d.id,
            d.endpoint_id,
            attempt,
            DeliveryStatus.PENDING,
            decision.next_attempt_at,
            counts_attempt=True,
            failing_level=failing_level(d.schedule_count + 1),
        )
    return DeliveryResult(
        d.id,
        d.endpoint_id,
        attempt,
        DeliveryStatus.FAILED,
        None,
        counts_attempt=True,
        exhausted=True,
        disable_endpoint=True,
        disabled_reason=(
            decision.reason or f"the last of {d.schedule_count + 1} attempts failed: {sent.error}"
        )[:500],
    )


def unclaimed(claim: Claim) -> DeliveryResult:
    """Hands a claimed delivery back unsent: due when it was due, no attempt counted."""
    d = claim.delivery
    return DeliveryResult(d.id, d.endpoint_id, None, d.status, d.next_attempt_at, counts_attempt=False)

"""What a broker delivery carries besides the body (docs/webhooks.md "Destinations"): the same signature
headers as an HTTP delivery of the endpoint's scheme (``svckit.signing.delivery_headers``: a receiver
verifies the body exactly as a webhook's), the event id, its type and its time; and the results a
broker's answer makes in the attempt log.

A broker's refusal is stored as an ``http_error`` attempt whose status is the broker's own code where it
has one (AMQP reply codes: 312 unroutable, 403 access refused, 404 no such exchange or vhost; NATS: 503
no stream captures the subject), a broker that cannot be reached as ``network_error``, no answer within
the delivery timeout as ``timeout``: so retries, disabling, breakers and the failing alerts treat them
as they treat an HTTP receiver's.
"""

from __future__ import annotations

import datetime as dt
import json
import time

from svckit.signing import EVENT_ID_HEADER, USER_AGENT, delivery_headers
from webhookd import _metrics as metrics
from webhookd._repository import EndpointRecord
from webhookd._retry import Outcome
from webhookd._sender import SendResult

EVENT_TYPE_HEADER = "X-Service-Event-Type"
TIMESTAMP_HEADER = "X-Service-Timestamp"
_ATTEMPTS = {r: metrics.ATTEMPTS.labels(r.value) for r in Outcome}


def event_type(body: bytes) -> str:
    try:
        value = json.loads(body).get("type", "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def message_headers(endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime) -> dict[str, str]:
    """The headers of a broker message: the endpoint's signature headers, event id, type and time."""
    headers = delivery_headers(
        endpoint.valid_secrets(now), body, event_id, now, endpoint.signature_scheme, endpoint.signers(now)
    )
    headers.pop("Content-Type", None)  # a message property (content_type) where the broker has one
    headers["User-Agent"] = USER_AGENT
    headers[EVENT_ID_HEADER] = event_id
    headers[EVENT_TYPE_HEADER] = event_type(body)
    headers[TIMESTAMP_HEADER] = str(int(now.timestamp()))
    return headers


class Timer:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def result(
        self, outcome: Outcome, headers: dict[str, str], status: int = 0, error: str = "", body: str = ""
    ) -> SendResult:
        latency = time.perf_counter() - self.start
        metrics.LATENCY.observe(latency)
        _ATTEMPTS[outcome].inc()
        return SendResult(outcome, status, body, headers, latency * 1000, error[:500])


def misconfigured(headers: dict[str, str], kind: str) -> SendResult:
    """An endpoint of the type without its settings (cannot happen through the API): a failed attempt."""
    return Timer().result(Outcome.NETWORK_ERROR, headers, error=f"the endpoint has no {kind} settings")

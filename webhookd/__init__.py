"""webhookd: webhook endpoints, events, signing, durable delivery with retries, attempt log, stream.

Partners verify deliveries with ``verify(raw_body, header, secrets, now)``.
"""

from __future__ import annotations

from svckit.signing import SIGNATURE_HEADER, delivery_headers, new_secret, sign, verify
from webhookd._errors import (
    Conflict,
    InvalidRequest,
    NoMatchingSignature,
    NotFound,
    PayloadTooLarge,
    SignatureFormatError,
    TimestampTooNew,
    TimestampTooOld,
    Unavailable,
    UnsafeTarget,
    WebhookError,
    WebhookVerificationError,
)
from webhookd._events import EVENT_KINDS, MAX_PAYLOAD_BYTES, TEST_EVENT_KIND, Environment, build_envelope
from webhookd._http import FastTransport
from webhookd._retry import MAX_ATTEMPTS, RETRY_DELAYS, Action, Decision, Outcome, next_attempt
from webhookd._ssrf import Policy, check_target, check_url, forbidden_reason

__all__ = [
    "EVENT_KINDS",
    "MAX_ATTEMPTS",
    "MAX_PAYLOAD_BYTES",
    "RETRY_DELAYS",
    "SIGNATURE_HEADER",
    "TEST_EVENT_KIND",
    "Action",
    "Conflict",
    "Decision",
    "Environment",
    "FastTransport",
    "InvalidRequest",
    "NoMatchingSignature",
    "NotFound",
    "Outcome",
    "PayloadTooLarge",
    "Policy",
    "SignatureFormatError",
    "TimestampTooNew",
    "TimestampTooOld",
    "Unavailable",
    "UnsafeTarget",
    "WebhookError",
    "WebhookVerificationError",
    "build_envelope",
    "check_target",
    "check_url",
    "delivery_headers",
    "forbidden_reason",
    "new_secret",
    "next_attempt",
    "sign",
    "verify",
]

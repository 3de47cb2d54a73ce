"""webhookd's exceptions. One root, every public type from svckit.errors.ERROR_KINDS:

    ServiceError                      (svckit)
    └── WebhookError                  internal_error unless a subclass says otherwise
        ├── InvalidRequest            invalid_request: bad field (the message names it)
        │   └── UnsafeTarget          invalid_request: URL refused by the SSRF guard
        ├── PayloadTooLarge           payload_too_large: event data over MAX_PAYLOAD_BYTES
        ├── NotFound                  not_found: unknown id, or an id of another account/environment
        ├── Conflict                  conflict: the resource is not in a state that allows the call
        ├── IdempotencyKeyReused      idempotency_key_reused: the key came with a different request
        ├── RateLimited               rate_limited: an account's sandbox events of a day are at their bound
        ├── Unavailable               service_unavailable
        └── SecretsKeyError           internal_error: --secrets-key missing, malformed or not the sealing key

Receiver side (no gRPC involved, raised by ``verify``), defined in ``svckit.signing`` and re-exported
under the same names:

    WebhookVerificationError
    ├── SignatureFormatError          header missing or malformed
    ├── NoMatchingSignature           no v1= matches any of the given secrets
    ├── TimestampTooOld               t is more than ``tolerance`` seconds in the past
    └── TimestampTooNew               t is more than ``tolerance`` seconds in the future
"""

from __future__ import annotations

from svckit.errors import ServiceError
from svckit.signing import (
    NoMatchingSignature,
    SignatureFormatError,
    TimestampTooNew,
    TimestampTooOld,
    WebhookVerificationError,
)

__all__ = [
    "Conflict",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "NoMatchingSignature",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "SecretsKeyError",
    "SignatureFormatError",
    "TimestampTooNew",
    "TimestampTooOld",
    "Unavailable",
    "UnsafeTarget",
    "WebhookError",
    "WebhookVerificationError",
]


class WebhookError(ServiceError):
    domain = "webhooks.travel"
    type = "internal_error"


class InvalidRequest(WebhookError):
    type = "invalid_request"


class UnsafeTarget(InvalidRequest):
    pass


class PayloadTooLarge(WebhookError):
    type = "payload_too_large"


class NotFound(WebhookError):
    type = "not_found"


class Conflict(WebhookError):
    type = "conflict"


class IdempotencyKeyReused(WebhookError):
    type = "idempotency_key_reused"


class RateLimited(WebhookError):
    type = "rate_limited"


class Unavailable(WebhookError):
    type = "service_unavailable"


class SecretsKeyError(WebhookError):
    """The secrets key is missing, malformed or not the one the stored signing secrets were sealed with."""

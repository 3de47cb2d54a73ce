"""svc: the partner command line for the sandbox (listen, trigger, verify), and the receiver's check of a
delivery's signature; see docs/sandbox.md. Partners install it as the ``svc-partner`` package (import name
``svc_partner``, built by scripts/build_partner_package), where these names are the public API."""

from svccli.verification import Verified, verify_delivery
from svckit.signing import (
    NoMatchingSignature,
    SignatureFormatError,
    TimestampTooNew,
    TimestampTooOld,
    WebhookVerificationError,
    verify,
    verify_standard,
)

__all__ = [
    "NoMatchingSignature",
    "SignatureFormatError",
    "TimestampTooNew",
    "TimestampTooOld",
    "Verified",
    "WebhookVerificationError",
    "verify",
    "verify_delivery",
    "verify_standard",
]

"""Verifying a delivery on the partner's side, whichever signature headers it carries: the spec's
``X-Service-Signature`` (``svckit.signing.verify``) or Standard Webhooks' ``webhook-*``
(``svckit.signing.verify_standard``). The partner package exports these (``from svc_partner import
verify_delivery``); docs/webhooks.md "Receiver examples"."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from svckit.signing import (
    DEFAULT_TOLERANCE,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    STANDARD_ID_HEADER,
    STANDARD_SIGNATURE_HEADER,
    SignatureFormatError,
    header_value,
    verify,
    verify_standard,
)


class Verified(NamedTuple):
    """A delivery that verified: its event id (the deduplication key), when it was signed (unix seconds)
    and which headers were checked ("stripe": X-Service-Signature, "standard": webhook-*)."""

    event_id: str
    timestamp: int
    scheme: str


def verify_delivery(
    raw_body: bytes,
    headers: Mapping[str, str],
    secrets: str | Sequence[str],
    now: dt.datetime | float | None = None,
    tolerance: int = DEFAULT_TOLERANCE,
) -> Verified:
    """Check one delivery: ``raw_body`` exactly as received, ``headers`` as received (any case), the
    endpoint's signing secret or, during a rotation, every secret held. ``X-Service-Signature`` is checked
    when the delivery has it (an endpoint of scheme ``stripe`` or ``both``), else the Standard Webhooks
    headers. Raises ``WebhookVerificationError`` (a subclass saying why) when it does not verify."""
    when = time.time() if now is None else now
    if header_value(headers, SIGNATURE_HEADER):
        signed = verify(raw_body, header_value(headers, SIGNATURE_HEADER), secrets, when, tolerance)
        return Verified(header_value(headers, EVENT_ID_HEADER), signed, "stripe")
    if header_value(headers, STANDARD_SIGNATURE_HEADER):
        signed = verify_standard(raw_body, headers, secrets, when, tolerance)
        return Verified(header_value(headers, STANDARD_ID_HEADER), signed, "standard")
    raise SignatureFormatError(f"neither {SIGNATURE_HEADER} nor {STANDARD_SIGNATURE_HEADER} is present")

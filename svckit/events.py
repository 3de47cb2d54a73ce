"""The closed list of event kinds (spec.md section 6), shared by webhookd and the edge's stream. The kinds,
their modes, states and ``data`` shapes are defined once, in the event catalog (svckit.catalog)."""

from __future__ import annotations

import json

from svckit.catalog import EVENT_KINDS, MODE_ONLY

__all__ = [
    "EVENT_KINDS",
    "MODE_ONLY",
    "TRIGGER_HEADER",
    "TRIGGER_NAMES",
    "TRIGGER_STATUS",
    "mode_refusal",
]

# EVENT_KINDS: every kind, in the catalog's order. MODE_ONLY: kinds that exist in one commercial mode only
# (spec.md sections 1 and 6): the traveller pays in mode B, the partner spends its own credit in mode A.


def mode_refusal(kind: str, mode: str) -> str:
    """Why an event of ``kind`` cannot be about an account of commercial ``mode`` ("A" or "B", any case),
    or "" when it can. payment.* exist for mode B accounts only (the traveller pays), ledger.low_balance
    for mode A only (the partner's credit); every other kind for both. An unknown mode ("") refuses
    nothing: the caller could not tell."""
    wanted = MODE_ONLY.get(kind)
    if wanted is None or not mode or mode.upper() == wanted:
        return ""
    return f"type: {kind} exists for mode {wanted} accounts only; this account is mode {mode.upper()}"


# The sandbox's six forced-failure triggers (a request header, decisions.md "Sandbox"), with the HTTP status
# a request carrying one answers where it applies: the error it forces (429, 503, 402; the warning events
# of the 402s are published first), or 202 for the two that run the route and publish failure events
# instead of the success ones. Where each applies and what it does is the edge's decision
# (edge.triggers); ``svc trigger --failure`` sends them and checks the status.
TRIGGER_HEADER = "X-Sandbox-Trigger"
TRIGGER_STATUS: dict[str, int] = {
    "rate_limited": 429,
    "service_unavailable": 503,
    "search_quota_exhausted": 402,
    "credit_exhausted": 402,
    "booking_failed": 202,
    "payment_failed": 202,
}
TRIGGER_NAMES: tuple[str, ...] = tuple(TRIGGER_STATUS)


# The most bytes of a sandbox event's ``data`` (compact JSON, UTF-8; ``data_bytes``): the edge answers 413
# payload_too_large for ``POST /v1/sandbox/events`` above it, webhookd's PublishEvent refuses a sandbox event
# above it from any publisher (INVALID_ARGUMENT, payload_too_large). Live events keep webhookd's envelope
# limit (``webhookd._events.MAX_PAYLOAD_BYTES``, 256 KiB).
SANDBOX_DATA_MAX_BYTES = 64 * 1024


def data_bytes(data: object) -> int:
    """The size of an event's ``data`` as both the edge and webhookd measure it."""
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())

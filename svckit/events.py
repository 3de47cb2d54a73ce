"""The closed list of event kinds (spec.md section 6), shared by webhookd and the edge's stream."""

from __future__ import annotations

EVENT_KINDS: tuple[str, ...] = (
    "booking.confirmed",
    "booking.failed",
    "booking.cancelled",
    "booking.modified",
    "payment.succeeded",
    "payment.failed",
    "payment.refunded",
    "esim.provisioned",
    "esim.usage_threshold",
    "ledger.low_balance",
    "search_quota.threshold",
    "settlement.invoice_issued",
    "settlement.payment_failed",
    "apikey.revoked",
)

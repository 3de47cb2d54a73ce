"""The statuses of webhook deliveries and endpoints: the strings webhookd stores and the words the public
API shows. The proto enums mirror them by name (``DELIVERY_STATUS_<NAME>``, ``ENDPOINT_STATUS_<NAME>``,
``DELIVERY_ORDER_<NAME>``); ``svckit.prototables`` derives the tables."""

from __future__ import annotations

from enum import StrEnum


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # waiting for its next attempt
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # every attempt of its schedule failed, or its endpoint was deleted
    HELD = "held"  # kept, not sent, while its endpoint is disabled; recoverable


class EndpointStatus(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


class DeliveryOrder(StrEnum):
    """An endpoint's delivery order (docs/webhooks.md "Ordered delivery"); the words are the API's."""

    UNORDERED = "none"  # the default: deliveries go out in parallel
    PER_RESOURCE = "perResource"  # one in flight per booking or eSIM order, oldest event first

"""The statuses of webhook deliveries and endpoints: the strings webhookd stores and the words the public
API shows. The proto enums mirror them by name (``DELIVERY_STATUS_<NAME>``, ``ENDPOINT_STATUS_<NAME>``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, TypeVar

V = TypeVar("V", covariant=True)


class _ProtoEnum(Protocol[V]):
    def Value(self, name: str) -> V: ...


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # waiting for its next attempt
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # every attempt of its schedule failed, or its endpoint was deleted
    HELD = "held"  # kept, not sent, while its endpoint is disabled; recoverable


class EndpointStatus(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


def proto_values(status: type[StrEnum], proto_enum: _ProtoEnum[V], prefix: str) -> dict[V, str]:
    """{proto number: status string} for every member, e.g. ``DELIVERY_STATUS_HELD`` -> "held"
    (``proto_enum`` is the generated enum wrapper, e.g. ``webhooks_pb2.DeliveryStatus``)."""
    return {proto_enum.Value(f"{prefix}{m.name}"): m.value for m in status}

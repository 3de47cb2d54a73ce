"""The statuses of webhook deliveries and endpoints: the strings webhookd stores and the words the public
API shows. The proto enums mirror them by name (``DELIVERY_STATUS_<NAME>``, ``ENDPOINT_STATUS_<NAME>``,
``DELIVERY_ORDER_<NAME>``, ``DESTINATION_TYPE_<NAME>``); ``svckit.prototables`` derives the tables."""

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


class PayloadMode(StrEnum):
    """What an endpoint's deliveries carry (docs/webhooks.md "Thin payloads"); the words are the API's."""

    FULL = "full"  # the default: the whole event
    THIN = "thin"  # id, type, time and the kind's resource references (svckit.eventkinds ``references``)


class DeliveryOrder(StrEnum):
    """An endpoint's delivery order (docs/webhooks.md "Ordered delivery"); the words are the API's."""

    UNORDERED = "none"  # the default: deliveries go out in parallel
    PER_RESOURCE = "perResource"  # one in flight per booking or eSIM order, oldest event first


class DestinationType(StrEnum):
    """Where an endpoint's deliveries go (docs/webhooks.md "Destinations"); the words are the API's "type"."""

    HTTP = "http"  # the default: a signed POST to the endpoint's url
    POLLING = (
        "polling"  # no url: the partner polls; the worker never sends these (``webhookd._destinations``)
    )
    AMQP = "amqp"  # a RabbitMQ exchange and routing key of the partner's (``webhookd._amqp``)
    NATS = "nats"  # a NATS JetStream subject of the partner's (``webhookd._nats``)

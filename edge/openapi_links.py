"""OpenAPI links of the edge's document: which answer's field feeds which operation's parameter, so a
generated client's user (and a stateful test) can follow a created endpoint or booking to its reads and
changes. Keyed by (operationId, status) of the answer that carries the value."""

from __future__ import annotations

from typing import Any

from svckit.resources import BOOKING_PRODUCTS

_ENDPOINT_OPS = (
    "getWebhookEndpoint",
    "updateWebhookEndpoint",
    "deleteWebhookEndpoint",
    "rotateWebhookSecret",
    "enableWebhookEndpoint",
    "recoverWebhookEndpoint",
    "sendWebhookTest",
    "pollWebhookEndpoint",
    "commitWebhookPoll",
)


def _links(targets: tuple[str, ...], param: str, expression: str) -> dict[str, Any]:
    return {
        target[0].upper() + target[1:]: {"operationId": target, "parameters": {param: expression}}
        for target in targets
    }


def links(operation_ids: set[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(operationId, status) -> the links of that answer, to the operations the document has."""
    out: dict[tuple[str, str], dict[str, Any]] = {
        ("createWebhookEndpoint", "201"): _links(_ENDPOINT_OPS, "endpoint_id", "$response.body#/id"),
        ("listWebhookAttempts", "200"): _links(
            ("resendWebhookAttempt",), "attempt_id", "$response.body#/data/0/id"
        ),
        ("sendSandboxEvent", "202"): _links(("getEvent",), "event_id", "$response.body#/event/id"),
        ("listEvents", "200"): _links(("getEvent",), "event_id", "$response.body#/data/0/id"),
        ("listEventTypes", "200"): _links(("getEventType",), "kind", "$response.body#/data/0/kind"),
    }
    for product in BOOKING_PRODUCTS:
        cap = product.capitalize()
        out[(f"create{cap}Booking", "202")] = _links(
            (f"get{cap}Booking", f"modify{cap}Booking", f"cancel{cap}Booking"),
            "booking_id",
            "$response.body#/id",
        )
        out[(f"search{cap}", "200")] = _links((f"get{cap}Offer",), "offer_id", "$response.body#/data/0/id")
    out[("createEsimOrder", "202")] = _links(
        ("getEsimOrder", "getEsimOrderUsage"), "order_id", "$response.body#/id"
    )
    return {
        key: {name: link for name, link in value.items() if link["operationId"] in operation_ids}
        for key, value in out.items()
        if key[0] in operation_ids
    }

"""The product routes' part of the OpenAPI document: from the route table (edge.routetable), with the
bodies and answers of the built-in sandbox simulator (edge.simulator) on the routes it answers. A route to
an upstream of the deployment's own says only what the edge checks (scope, headers, a JSON object body);
its bodies are the upstream's."""

from __future__ import annotations

from typing import Any

from edge.openapi_schemas import OBJ, STR, list_of

_ID = {"type": "string", "pattern": "^[A-Za-z0-9_]+$"}
OFFER = {
    "type": "object",
    "required": ["object", "id", "product", "name", "amount", "currency"],
    "properties": {
        "object": {"const": "offer"},
        "id": _ID,
        "product": STR,
        "name": STR,
        "amount": {"type": "integer", "minimum": 0},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "livemode": {"type": "boolean"},
    },
}
_SUBJECT = {
    "id": _ID,
    "state": {"enum": ["pending", "confirmed", "provisioned", "cancelled", "failed"]},
    "livemode": {"type": "boolean"},
    "product": STR,
    "amount": {"type": "integer"},
    "currency": STR,
    "customerRef": STR,
}
BOOKING = {
    "type": "object",
    "required": ["object", "id", "state"],
    "properties": {"object": {"const": "booking"}, "booking": _ID, "offer": STR, **_SUBJECT},
}
ORDER = {
    "type": "object",
    "required": ["object", "id", "state"],
    "properties": {"object": {"const": "esim_order"}, "order": _ID, "plan": STR, **_SUBJECT},
}
PLAN = {
    "type": "object",
    "required": ["object", "id", "name", "amount", "currency"],
    "properties": {
        "object": {"const": "esim_plan"},
        "id": STR,
        "name": STR,
        "amount": {"type": "integer"},
        "currency": STR,
        "dataBytes": {"type": "integer"},
    },
}
USAGE = {
    "type": "object",
    "required": ["object", "order", "usedBytes", "limitBytes"],
    "properties": {
        "object": {"const": "esim_usage"},
        "order": STR,
        "usedBytes": {"type": "integer"},
        "limitBytes": {"type": "integer"},
        "livemode": {"type": "boolean"},
    },
}


def builtin(action: str, product: str) -> tuple[int, dict[str, Any], dict[str, Any] | None]:
    """(success status, its body, request body or None) of a simulator action on ``product``."""
    subject = ORDER if product == "esim" else BOOKING
    if action == "search":
        return 200, {**list_of(OFFER), "properties": {**list_of(OFFER)["properties"], "query": OBJ}}, None
    if action == "offer":
        return 200, OFFER, None
    if action == "plans":
        return 200, list_of(PLAN), None
    if action == "usage":
        return 200, USAGE, None
    if action == "get":
        return 200, subject, None
    if action == "create":
        field = "plan" if product == "esim" else "offer"
        example = "plan_eu_5gb" if product == "esim" else f"off_{product}_1"
        body: dict[str, Any] = {
            "type": "object",
            "properties": {
                field: {
                    "type": "string",
                    "description": f"default {example}; an unknown one is 404 not_found",
                    "examples": [example],
                }
            },
        }
        return 202, subject, body
    if action == "modify":
        changes = {
            "type": "object",
            "minProperties": 1,
            "description": "the fields to change (sent on in booking.modified's changes)",
        }
        return 200, subject, changes
    return 200, subject, {"type": "object"}  # cancel: a body is read as nothing

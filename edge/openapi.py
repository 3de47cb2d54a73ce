"""The OpenAPI 3.1 document of the edge, built from the fixed routes and the product route table."""

from __future__ import annotations

from typing import Any

from edge.config import EdgeConfig
from svckit.catalog import TEST_KIND, envelope_schema
from svckit.errors import ERROR_KINDS
from svckit.events import EVENT_KINDS
from svckit.prototables import ATTEMPT_OUTCOME
from svckit.webhook_status import DeliveryStatus, EndpointStatus

ERROR_REF = {"$ref": "#/components/responses/Error"}


def _params(*names: str) -> list[dict[str, Any]]:
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for n in names
    ]


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": True,
    "description": "1 to 255 printable ASCII characters; kept 24 h per account and environment.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
}
CUSTOMER_REF = {
    "name": "X-Partner-Customer-Ref",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[\\x21-\\x7e]+$"},
}
LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": 100})
PAGE = _query("page_token", {"type": "string"})

OBJ = {"type": "object"}
ENDPOINT_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "url", "events", "status"],
    "properties": {
        "object": {"const": "webhook_endpoint"},
        "id": {"type": "string"},
        "url": {"type": "string"},
        "events": {"type": "array", "items": {"type": "string"}},
        "description": {"type": "string"},
        "status": {"enum": [s.value for s in EndpointStatus]},
        "secret": {"type": "string"},
    },
}
DELETED_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "deleted"],
    "properties": {
        "object": {"const": "webhook_endpoint"},
        "id": {"type": "string"},
        "deleted": {"const": True},
    },
}
LIST_SCHEMA = {
    "type": "object",
    "required": ["object", "data"],
    "properties": {
        "object": {"const": "list"},
        "data": {"type": "array"},
        "nextPageToken": {"type": ["string", "null"]},
    },
}
ATTEMPT_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "deliveryId", "outcome", "requestHeaders", "responseHeaders"],
    "properties": {
        "object": {"const": "webhook_attempt"},
        "id": {"type": "string"},
        "deliveryId": {"type": "string"},
        "endpointId": {"type": "string"},
        "eventId": {"type": "string"},
        "attemptNumber": {"type": "integer"},
        "outcome": {"enum": [*ATTEMPT_OUTCOME.names().values(), "unknown"]},
        "responseStatus": {"type": ["integer", "null"]},
        "responseBody": {"type": "string", "description": "the first 4 KiB of the receiver's response"},
        "requestHeaders": {"type": "object", "additionalProperties": {"type": "string"}},
        "responseHeaders": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "the receiver's response headers, lower-case names, at most 4 KiB in all",
        },
        "latencyMs": {"type": "number"},
        "error": {"type": ["string", "null"]},
        "attempted": {"type": ["string", "null"]},
        "manual": {"type": "boolean"},
    },
}


def _list_of(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": item},
            "nextPageToken": {"type": ["string", "null"]},
        },
    }


ENDPOINT_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "url": {"type": "string", "format": "uri"},
        "events": {"type": "array", "items": {"type": "string"}},
        "description": {"type": "string", "maxLength": 1024},
    },
}


def _op(
    summary: str,
    scope: str | None,
    ok: int = 200,
    schema: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    post: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {
            str(ok): {"description": "OK", "content": {"application/json": {"schema": schema or OBJ}}},
            "default": ERROR_REF,
        },
    }
    if scope:
        op["description"] = f"Required scope: `{scope}`."
        op["x-required-scope"] = scope
        op["security"] = [{"svcKey": []}]
    else:
        op["security"] = []
    params = list(params or [])
    if post:
        params.append(IDEMPOTENCY)
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
    return op


def event_schema_name(kind: str) -> str:
    """The component of the envelope of ``kind``: booking.confirmed -> BookingConfirmedEvent."""
    return "".join(w.capitalize() for w in kind.replace(".", "_").split("_")) + "Event"


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def event_schemas() -> dict[str, Any]:
    """One component per event kind (webhook.test included): its whole envelope, ``data`` by the event
    catalog's JSON Schema (svckit.catalog); OpenAPI 3.1's schemas are JSON Schema 2020-12 as they are."""
    out = {}
    for kind in (*EVENT_KINDS, TEST_KIND.kind):
        schema = envelope_schema(kind)
        schema.pop("$schema", None)
        out[event_schema_name(kind)] = schema
    return out


# An event read back (GET /v1/events): one of the published kinds' envelopes, told apart by ``type``.
EVENT_SCHEMA = {
    "oneOf": [_ref(event_schema_name(k)) for k in EVENT_KINDS],
    "discriminator": {
        "propertyName": "type",
        "mapping": {k: f"#/components/schemas/{event_schema_name(k)}" for k in EVENT_KINDS},
    },
}
EVENT_TYPE_SCHEMA = {
    "type": "object",
    "required": ["object", "kind", "description", "states", "mode", "subscribable", "schema", "example"],
    "properties": {
        "object": {"const": "event_type"},
        "kind": {"enum": [*EVENT_KINDS, TEST_KIND.kind]},
        "description": {"type": "string"},
        "states": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "mode": {"enum": ["A", "B", None], "description": "its only commercial mode; null: both"},
        "subscribable": {"type": "boolean", "description": "false: sent by test sends only (webhook.test)"},
        "schema": {"type": "object", "description": "JSON Schema (draft 2020-12) of the event's data"},
        "example": {"type": "object", "description": "an example data, valid against schema"},
    },
}


def webhooks() -> dict[str, Any]:
    """OpenAPI 3.1 ``webhooks``: what a partner's endpoint receives, one entry per event kind."""
    return {
        kind: {
            "post": {
                "summary": f"{kind} delivered to a subscribed endpoint (signed: X-Service-Signature)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(event_schema_name(kind))}},
                },
                "responses": {"2XX": {"description": "received; anything else is retried"}},
            }
        }
        for kind in (*EVENT_KINDS, TEST_KIND.kind)
    }


EVENT_LIST_SCHEMA = _list_of(EVENT_SCHEMA)


def _any_key(op: dict[str, Any]) -> dict[str, Any]:
    """An operation any valid key may call (what it sees depends on its scopes)."""
    op["security"] = [{"svcKey": []}]
    op["description"] = "Any valid key; events are filtered by the key's scopes as on /v1/stream."
    return op


def build_openapi(config: EdgeConfig) -> dict[str, Any]:
    ep = _params("endpoint_id")
    paths: dict[str, Any] = {
        "/v1/account": {
            "get": _op("Read own account, the calling key and today's search usage", "account:read")
        },
        "/v1/customers/{ref}": {
            "delete": _op(
                "Remove the traveller record of a partner reference", "account:write", params=_params("ref")
            )
        },
        "/v1/webhooks/endpoints": {
            "get": _op("List webhook endpoints", "webhooks:read", schema=LIST_SCHEMA, params=[LIMIT, PAGE]),
            "post": _op(
                "Register a webhook endpoint (the response carries its signing secret, once)",
                "webhooks:write",
                201,
                ENDPOINT_SCHEMA,
                body={**ENDPOINT_BODY, "required": ["url", "events"]},
                post=True,
            ),
        },
        "/v1/webhooks/endpoints/{endpoint_id}": {
            "get": _op("Get a webhook endpoint", "webhooks:read", schema=ENDPOINT_SCHEMA, params=ep),
            "post": _op(
                "Update url, events or description",
                "webhooks:write",
                schema=ENDPOINT_SCHEMA,
                params=ep,
                body=ENDPOINT_BODY,
                post=True,
            ),
            "delete": _op("Delete a webhook endpoint", "webhooks:write", schema=DELETED_SCHEMA, params=ep),
        },
        "/v1/webhooks/endpoints/{endpoint_id}/rotate_secret": {
            "post": _op(
                "Rotate the signing secret; the old one stays valid for overlapSeconds (default 24 h)",
                "webhooks:write",
                schema=ENDPOINT_SCHEMA,
                params=ep,
                body={
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"overlapSeconds": {"type": "integer", "minimum": 0, "maximum": 604800}},
                },
                post=True,
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/enable": {
            "post": _op(
                "Re-enable a disabled endpoint",
                "webhooks:write",
                schema=ENDPOINT_SCHEMA,
                params=ep,
                post=True,
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/recover": {
            "post": _op(
                "Re-send what the endpoint missed since a time",
                "webhooks:write",
                params=ep,
                body={
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["since"],
                    "properties": {"since": {"type": "string", "format": "date-time"}},
                },
                post=True,
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/test": {
            "post": _op("Send a sample delivery to the endpoint", "webhooks:write", 202, params=ep, post=True)
        },
        "/v1/sandbox/events": {
            "post": _op(
                "Sandbox only: publish a sample event of a kind to the account's endpoints and stream",
                "webhooks:write",
                202,
                body={
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["type"],
                    "properties": {"type": {"enum": list(EVENT_KINDS)}, "data": {"type": "object"}},
                },
                post=True,
            )
        },
        "/v1/sandbox/clock/advance": {
            "post": _op(
                "Sandbox only: bring the account's sandbox delivery schedule forward (a test clock)",
                "webhooks:write",
                body={
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["by"],
                    "properties": {
                        "by": {
                            "type": "string",
                            "minLength": 2,
                            "maxLength": 16,
                            "pattern": "^([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?$",
                            "description": "1s to 7d, e.g. 30s, 5m, 2h, 1d, 1h30m",
                        }
                    },
                },
                post=True,
            )
        },
        "/v1/webhooks/deliveries": {
            "get": _op(
                "List deliveries (one event to one endpoint)",
                "webhooks:read",
                schema=LIST_SCHEMA,
                params=[
                    _query("endpoint", {"type": "string"}),
                    _query("event", {"type": "string"}),
                    _query("status", {"enum": [s.value for s in DeliveryStatus]}),
                    LIMIT,
                    PAGE,
                ],
            )
        },
        "/v1/webhooks/attempts": {
            "get": _op(
                "List delivery attempts (kept 30 days) with the response received",
                "webhooks:read",
                schema=_list_of(ATTEMPT_SCHEMA),
                params=[
                    _query("endpoint", {"type": "string"}),
                    _query("event", {"type": "string"}),
                    _query("delivery", {"type": "string"}),
                    LIMIT,
                    PAGE,
                ],
            )
        },
        "/v1/webhooks/attempts/{attempt_id}/resend": {
            "post": _op(
                "Resend the delivery of an attempt now",
                "webhooks:write",
                202,
                params=_params("attempt_id"),
                post=True,
            )
        },
        "/v1/events": {
            "get": _any_key(
                _op(
                    "List the account's events of the last 30 days, newest first",
                    None,
                    schema=EVENT_LIST_SCHEMA,
                    params=[
                        _query("type", {"type": "string"}),
                        _query("created[gte]", {"type": "string", "format": "date-time"}),
                        _query("created[lt]", {"type": "string", "format": "date-time"}),
                        LIMIT,
                        PAGE,
                    ],
                )
            )
        },
        "/v1/events/{event_id}": {
            "get": _any_key(
                _op(
                    "Get one event of the last 30 days", None, schema=EVENT_SCHEMA, params=_params("event_id")
                )
            )
        },
        "/v1/event-types": {
            "get": _op(
                "The event catalog: every event kind with its states, data schema and an example",
                "account:read",
                schema=_list_of(_ref("EventType")),
            )
        },
        "/v1/event-types/{kind}": {
            "get": _op(
                "One event kind of the catalog, e.g. booking.confirmed",
                "account:read",
                schema=_ref("EventType"),
                params=_params("kind"),
            )
        },
        "/v1/stream": {
            "get": {
                "summary": "WebSocket stream of the account's events "
                "(Sec-WebSocket-Protocol: svc, <API_KEY>)",
                "description": "Any valid key; events are filtered by the key's scopes. See docs/edge.md.",
                "security": [{"svcKey": []}],
                "responses": {
                    "101": {"description": "Switching protocols (subprotocol svc)"},
                    "default": ERROR_REF,
                },
            }
        },
    }
    for route in config.routes.routes:
        op = _op(
            route.summary or f"{route.method} {route.path}",
            route.scope,
            params=[*_params(*route.params), *([CUSTOMER_REF] if route.traveller != "none" else [])],
            body=OBJ if route.method in ("POST", "PUT", "PATCH") else None,
            post=route.method == "POST",
        )
        if route.search:
            op["description"] += (
                " A search: counted against the daily allowance on live keys (402 when used up)."
            )
        paths.setdefault(route.path, {})[route.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "svc partner travel API (edge)",
            "version": "v1",
            "description": "Every request carries Authorization: Svc <API_KEY>. Errors: "
            + ", ".join(f"{t} ({k.http_status})" for t, k in ERROR_KINDS.items()),
        },
        "paths": paths,
        "webhooks": webhooks(),
        "components": {
            "securitySchemes": {
                "svcKey": {
                    "type": "http",
                    "scheme": "Svc",
                    "description": "Authorization: Svc <API_KEY> (Bearer works too)",
                }
            },
            "responses": {
                "Error": {
                    "description": "Refusal or error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
            },
            "schemas": {
                "EventType": EVENT_TYPE_SCHEMA,
                **event_schemas(),
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["type", "message", "requestId", "docUrl"],
                            "properties": {
                                "type": {"enum": sorted(ERROR_KINDS)},
                                "message": {"type": "string"},
                                "requestId": {"type": "string", "pattern": "^req_"},
                                "docUrl": {"type": "string"},
                            },
                        }
                    },
                },
            },
        },
    }

"""The pieces of the OpenAPI document (edge.openapi): parameters, request bodies and response schemas.

Each one says what the edge checks, from the constants the checks themselves use where there is one
(edge.negotiation's header limits, svckit.catalog's event kinds and schemas, svckit.durations' range), so
a schema-valid request is one the edge accepts and a schema-invalid one is refused (400, or 404 for an id
that cannot exist).
"""

from __future__ import annotations

from typing import Any

from edge.destinations import AMQP_BODY, NATS_BODY, TYPE_SCHEMA, body_rules, endpoint_schema_properties
from edge.negotiation import MAX_CUSTOMER_REF, MAX_IDEMPOTENCY_KEY
from edge.openapi_receiver_auth import RECEIVER_AUTH_BODY, RECEIVER_AUTH_SCHEMA
from edge.triggers import TRIGGERS, RouteKind
from svckit.catalog import TEST_KIND, catalog, envelope_schema
from svckit.durations import CLOCK_ADVANCE_MAX
from svckit.errors import ERROR_KINDS
from svckit.events import EVENT_KINDS, TRIGGER_HEADER
from svckit.filtercheck import DOCUMENT_FIELDS
from svckit.prototables import ATTEMPT_OUTCOME
from svckit.resources import ALL_SCOPES
from svckit.signing import SignatureScheme
from svckit.webhook_status import DeliveryOrder, DeliveryStatus, EndpointStatus, PayloadMode

OBJ: dict[str, Any] = {"type": "object"}
STR: dict[str, Any] = {"type": "string"}
# A key's scopes: the closed list of the resource table (svckit.resources).
SCOPES: dict[str, Any] = {"type": "array", "items": {"type": "string", "enum": list(ALL_SCOPES)}}
TIME = {"type": ["string", "null"], "format": "date-time"}
# The edge's e-mail shape (edge.negotiation): a customer reference must not be one.
EMAIL = "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$"
MODE_ONLY = {e["kind"]: e["mode"] for e in catalog(include_test=False) if e["mode"]}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


# -- parameters -------------------------------------------------------------------------------------
def id_param(name: str, prefix: str) -> dict[str, Any]:
    """A path id: ``<prefix>_`` and base62 (svckit.ids); anything else cannot exist (404)."""
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": f"^{prefix}_[0-9A-Za-z]+$", "maxLength": 64},
    }


def product_param(name: str) -> dict[str, Any]:
    """A product route's path parameter: one segment of unreserved characters, never a dot segment
    (edge.routetable.path_problem refuses those; the upstream answers 404 for an id it does not know)."""
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9_~-][A-Za-z0-9._~-]*$", "maxLength": 128},
    }


def query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    out = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        out["description"] = description
    return out


def query_id(name: str, prefix: str) -> dict[str, Any]:
    """A filter by id (edge.convert.query_id): ``<prefix>_``..., 400 otherwise; empty is no filter."""
    return query(name, {"type": "string", "pattern": f"^({prefix}_[0-9A-Za-z]+)?$", "maxLength": 64})


LIMIT = query("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "page size (default 20)")
PAGE = query(
    "page_token",
    {"type": "string", "maxLength": 512},
    "a previous page's `nextPageToken`, as returned (any other value: 400 invalid_request; empty: the "
    "first page)",
)
IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": True,
    "description": f"1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters, unique per request (a UUID); "
    "kept 24 h per account and environment. The same key with another request: 422 "
    "idempotency_key_reused; while the first still runs: 409 idempotency_key_in_use.",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY, "pattern": "^[ -~]+$"},
}
_REF_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_CUSTOMER_REF,
    "pattern": "^[!-~]+$",
    "not": {"pattern": EMAIL},
}
REF_DESCRIPTION = (
    f"the partner's opaque traveller reference: 1 to {MAX_CUSTOMER_REF} printable ASCII characters, no "
    "spaces, not an e-mail address (400 invalid_customer_ref)"
)


def customer_ref(required: bool) -> dict[str, Any]:
    return {
        "name": "X-Partner-Customer-Ref",
        "in": "header",
        "required": required,
        "description": REF_DESCRIPTION,
        "schema": _REF_SCHEMA,
    }


REF_PATH = {
    "name": "ref",
    "in": "path",
    "required": True,
    "description": REF_DESCRIPTION,
    "schema": _REF_SCHEMA,
}


def sandbox_trigger(kind: RouteKind) -> dict[str, Any] | None:
    """X-Sandbox-Trigger where a trigger lets the route run (booking_failed on creation), or None. The
    others force an error answer (429, 503, 402) and are described in the document's info instead; an
    empty header is no trigger."""
    names = [t.name for t in TRIGGERS.values() if kind in t.applies_to and t.failure_events and not t.modes]
    if not names:
        return None
    return {
        "name": TRIGGER_HEADER,
        "in": "header",
        "required": False,
        "description": "Sandbox only (400 on a live host): run the route, then publish the failure's events "
        "instead of the success's. " + TRIGGERS_TEXT,
        "schema": {"enum": ["", *names]},
    }


TRIGGERS_TEXT = (
    f"{TRIGGER_HEADER} (sandbox only) also forces an error answer where it applies: "
    + "; ".join(f"`{t.name}` on {t.where}" for t in TRIGGERS.values() if t.error_type)
    + " (docs/sandbox.md)."
)


# -- request bodies ---------------------------------------------------------------------------------
NO_FIELDS = {"type": "object", "additionalProperties": False, "maxProperties": 0}
_DESCRIPTION = {"type": "string", "maxLength": 1024, "pattern": "^[^\\x00-\\x1f\\x7f]*$"}
_URL: dict[str, Any] = {
    "type": "string",
    "format": "uri",
    "pattern": "^https://[^\\s#@/?]+(/[^\\s#]*)?$",
    "maxLength": 2048,
    "description": "https://; its host must resolve to public addresses (400 invalid_request otherwise)",
}
_EVENTS = {
    "type": "array",
    "items": {"enum": [*EVENT_KINDS, "*"], "x-account-mode": MODE_ONLY},
    "minItems": 1,
    "maxItems": 100,
    "description": 'the kinds to receive; ["*"] (alone) is every kind, including kinds added later; '
    + ", ".join(f"{k} for mode {m} accounts only" for k, m in MODE_ONLY.items())
    + " (400 otherwise)",
}
_SCHEME = {
    "enum": [s.value for s in SignatureScheme],
    "description": "signature headers: X-Service-Signature (stripe, the default), Standard Webhooks, or both",
}
_ORDERING = {
    "enum": [o.value for o in DeliveryOrder],
    "description": "none (the default): deliveries in parallel; perResource: one in flight per booking or "
    "eSIM order, oldest event first (docs/webhooks.md, Ordered delivery)",
}
_FILTER = {
    "type": ["object", "null"],
    "minProperties": 1,
    "maxProperties": 7,
    "propertyNames": {"enum": [*DOCUMENT_FIELDS, "$or", "$and", "$not"]},
    "description": "a content filter on the event's id, type, createdAt and data, in the operator language "
    "of docs/webhooks.md (Filters): only matching events are delivered; null (or absent) for none. A bad "
    "operator or operand is 400 invalid_request naming its path, e.g. filter.data.amount.$regex",
}
_PAYLOAD = {
    "enum": [p.value for p in PayloadMode],
    "description": "full (the default): the whole event; thin: its id, type, time and resource references "
    "only, the rest read with GET /v1/events/{id} (docs/webhooks.md, Thin payloads)",
}
# The fields a create and an update both take (each reads ``url`` its own way); which go together:
# edge.destinations (docs/webhooks.md "Destinations").
_ENDPOINT_FIELDS = {
    "events": _EVENTS,
    "description": _DESCRIPTION,
    "signatureScheme": _SCHEME,
    "ordering": _ORDERING,
    "filter": _FILTER,
    "payload": _PAYLOAD,
    "type": TYPE_SCHEMA,
    "amqp": AMQP_BODY,
    "nats": NATS_BODY,
    "receiverAuth": RECEIVER_AUTH_BODY,
}
ENDPOINT_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["events"],
    "properties": {
        "url": _URL | {"description": _URL["description"] + "; http endpoints only, and required for them"},
        **_ENDPOINT_FIELDS,
    },
    "allOf": body_rules(update=False),
}
ENDPOINT_UPDATE = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        "url": _URL
        | {"description": _URL["description"] + "; sent alone (without type), makes the endpoint http"},
        **_ENDPOINT_FIELDS,
    },
    "allOf": body_rules(update=True),
}
ROTATE_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"overlapSeconds": {"type": "integer", "minimum": 0, "maximum": 7 * 24 * 3600}},
}
RECOVER_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["since"],
    "properties": {
        "since": {"type": "string", "format": "date-time", "maxLength": 64},
        "dryRun": {"type": "boolean", "description": "count what would be re-sent, change nothing"},
    },
}
SAMPLE_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type"],
    "properties": {
        "type": {
            "enum": list(EVENT_KINDS),
            "x-account-mode": MODE_ONLY,
            "description": "an event kind; "
            + ", ".join(f"{k} for mode {m} accounts only" for k, m in MODE_ONLY.items())
            + " (400 otherwise)",
        },
        "data": {
            "type": "object",
            "description": "fields of the kind's data, merged over the sample's; the result must be valid "
            "against the kind's schema (GET /v1/event-types/{kind}), else 400 invalid_request",
        },
    },
}
# One unit of 1 to 99 seconds, minutes or hours, or 1 to 7 days: always within svckit.durations' range
# (1 s to 7 d). The edge also reads combinations in range (1h30m, 90m); the description says so.
CLOCK_PATTERN = f"^([1-9][0-9]?[smh]|[1-{CLOCK_ADVANCE_MAX.days}]d)$"
CLOCK_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["by"],
    "properties": {
        "by": {
            "type": "string",
            "pattern": CLOCK_PATTERN,
            "description": "1s to 7d: 30s, 5m, 2h, 1d; combinations largest unit first (1h30m) are read too",
        }
    },
}

# -- response schemas -------------------------------------------------------------------------------
ENDPOINT_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "url", "events", "status"],
    "properties": {
        "object": {"const": "webhook_endpoint"},
        "id": {"type": "string", "pattern": "^we_"},
        "url": {"type": ["string", "null"], "description": "null but for type http"},
        "events": {"type": "array", "items": STR},
        "description": STR,
        "status": {"enum": [s.value for s in EndpointStatus]},
        "disabledReason": {"type": ["string", "null"]},
        "livemode": {"type": "boolean"},
        "created": TIME,
        "updated": TIME,
        "previousSecretExpires": TIME,
        "secret": {"type": "string", "description": "the signing secret: on creation and rotation only"},
        "signatureScheme": {"enum": [s.value for s in SignatureScheme]},
        "ordering": {"enum": [o.value for o in DeliveryOrder]},
        "filter": {"type": ["object", "null"]},
        "payload": {"enum": [p.value for p in PayloadMode]},
        **endpoint_schema_properties(),
        "receiverAuth": RECEIVER_AUTH_SCHEMA,
    },
}
SIGNING_KEY_SCHEMA = {
    "type": "object",
    "required": ["object", "endpoint", "algorithm", "publicKey"],
    "properties": {
        "object": {"const": "webhook_signing_key"},
        "endpoint": {"type": "string", "pattern": "^we_"},
        "algorithm": {"const": "ed25519"},
        "publicKey": {"type": "string", "pattern": "^whpk_"},
        "expires": {"type": ["string", "null"], "format": "date-time"},
    },
}
DELETED_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "deleted"],
    "properties": {"object": {"const": "webhook_endpoint"}, "id": STR, "deleted": {"const": True}},
}
DELIVERY_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "endpointId", "eventId", "status"],
    "properties": {
        "object": {"const": "webhook_delivery"},
        "id": {"type": "string", "pattern": "^msg_"},
        "endpointId": STR,
        "eventId": STR,
        "eventType": STR,
        "status": {"enum": [s.value for s in DeliveryStatus]},
        "attemptCount": {"type": "integer"},
        "nextAttempt": TIME,
        "created": TIME,
        "updated": TIME,
    },
}
ATTEMPT_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "deliveryId", "outcome", "requestHeaders", "responseHeaders"],
    "properties": {
        "object": {"const": "webhook_attempt"},
        "id": {"type": "string", "pattern": "^att_"},
        "deliveryId": STR,
        "endpointId": STR,
        "eventId": STR,
        "attemptNumber": {"type": "integer"},
        "outcome": {"enum": [*ATTEMPT_OUTCOME.names().values(), "unknown"]},
        "responseStatus": {"type": ["integer", "null"]},
        "responseBody": {"type": "string", "description": "the first 4 KiB of the receiver's response"},
        "requestHeaders": {"type": "object", "additionalProperties": STR},
        "responseHeaders": {
            "type": "object",
            "additionalProperties": STR,
            "description": "the receiver's response headers, lower-case names, at most 4 KiB in all",
        },
        "latencyMs": {"type": "number"},
        "error": {"type": ["string", "null"]},
        "attempted": TIME,
        "manual": {"type": "boolean"},
    },
}
RECOVERY_SCHEMA = {
    "type": "object",
    "required": ["object", "endpointId", "recovered"],
    "properties": {
        "object": {"const": "webhook_recovery"},
        "endpointId": STR,
        "recovered": {"type": "integer"},
        # (a boolean, not const true: openapi-python-client 0.29 cannot generate an optional const)
        "dryRun": {"type": "boolean", "description": "present (true) on a dry run: nothing was re-sent"},
    },
}
CLOCK_SCHEMA = {
    "type": "object",
    "required": ["object", "advancedBy", "deliveriesDue"],
    "properties": {
        "object": {"const": "sandbox_clock"},
        "advancedBy": STR,
        "deliveriesDue": {"type": "integer"},
    },
}
CUSTOMER_SCHEMA = {
    "type": "object",
    "required": ["object", "ref", "deleted"],
    "properties": {
        "object": {"const": "customer"},
        "ref": STR,
        "travellerId": STR,
        "deleted": {"const": True},
    },
}
ACCOUNT_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "name", "mode", "status", "environment", "livemode", "key", "usage"],
    "properties": {
        "object": {"const": "account"},
        "id": STR,
        "name": STR,
        "mode": {"enum": ["A", "B"]},
        "status": STR,
        "environment": {"enum": ["live", "sandbox"]},
        "livemode": {"type": "boolean"},
        "key": {
            "type": "object",
            "required": ["id", "hint", "scopes", "status"],
            "properties": {
                "id": STR,
                "hint": STR,
                "scopes": SCOPES,
                "status": STR,
                "expiresAt": TIME,
            },
        },
        "usage": {
            "type": "object",
            "properties": {
                "date": STR,
                "searchesUsed": {"type": "integer"},
                "dailySearchAllowance": {"type": ["integer", "null"]},
                "remaining": {"type": ["integer", "null"]},
                "counted": {"type": "boolean"},
            },
        },
    },
}

INT = {"type": "integer"}
LEDGER_ENTRY_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "type", "amount", "availableAfter", "created"],
    "properties": {
        "object": {"const": "ledger_entry"},
        "id": STR,
        "type": {"enum": ["hold", "capture", "release", "credit", "limit", "warning_level"]},
        "reference": {"type": ["string", "null"], "description": "the booking reference, or the credit's"},
        "amount": {**INT, "description": "minor units; for limit and warning_level the new value"},
        "availableAfter": {**INT, "description": "the credit available right after this entry"},
        "note": {"type": ["string", "null"]},
        "created": {"type": "string", "format": "date-time"},
    },
}
LEDGER_SCHEMA = {
    "type": "object",
    "description": "available = creditLimit - held - captured + credits, in minor units of currency",
    "required": [
        "object", "account", "livemode", "currency", "creditLimit", "held", "captured", "credits",
        "available", "warningLevel", "entries",
    ],
    "properties": {
        "object": {"const": "ledger"},
        "account": STR,
        "livemode": {"type": "boolean"},
        "currency": {"type": ["string", "null"], "pattern": "^[A-Z]{3}$"},
        "creditLimit": INT,
        "held": INT,
        "captured": INT,
        "credits": INT,
        "available": INT,
        "warningLevel": INT,
        "updated": TIME,
        "entries": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": LEDGER_ENTRY_SCHEMA},
                "nextPageToken": {"type": ["string", "null"]},
            },
        },
    },
}  # fmt: skip


def list_of(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": item},
            "nextPageToken": {"type": ["string", "null"]},
        },
    }


def event_schema_name(kind: str) -> str:
    """The component of the envelope of ``kind``: booking.confirmed -> BookingConfirmedEvent."""
    return "".join(w.capitalize() for w in kind.replace(".", "_").split("_")) + "Event"


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
    "oneOf": [ref(event_schema_name(k)) for k in EVENT_KINDS],
    "discriminator": {
        "propertyName": "type",
        "mapping": {k: f"#/components/schemas/{event_schema_name(k)}" for k in EVENT_KINDS},
    },
}
TEST_SEND_SCHEMA = {
    "type": "object",
    "required": ["object", "event", "delivery"],
    "properties": {
        "object": {"const": "webhook_test"},
        "event": ref(event_schema_name(TEST_KIND.kind)),
        "delivery": ref("WebhookDelivery"),
    },
}
SAMPLE_SCHEMA = {
    "type": "object",
    "required": ["object", "event", "deliveryCount"],
    "properties": {
        "object": {"const": "sandbox_event"},
        "event": EVENT_SCHEMA,
        "deliveryCount": {"type": "integer"},
    },
}
EVENT_TYPE_SCHEMA = {
    "type": "object",
    "required": ["object", "kind", "description", "states", "mode", "subscribable", "schema", "example"],
    "properties": {
        "object": {"const": "event_type"},
        "kind": {"enum": [*EVENT_KINDS, TEST_KIND.kind]},
        "description": STR,
        "states": {"type": "array", "items": STR, "minItems": 1},
        "mode": {"enum": ["A", "B", None], "description": "its only commercial mode; null: both"},
        "subscribable": {"type": "boolean", "description": "false: sent by test sends only (webhook.test)"},
        "schema": {"type": "object", "description": "JSON Schema (draft 2020-12) of the event's data"},
        "example": {"type": "object", "description": "an example data, valid against schema"},
        "references": {
            "type": "array",
            "items": STR,
            "description": "the data fields a thin delivery keeps (payload: thin): the resources' ids",
        },
        "thinSchema": {"type": "object", "description": "JSON Schema of a whole thin delivery of the kind"},
    },
}
ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message", "requestId", "docUrl"],
            "properties": {
                "type": {"enum": sorted(ERROR_KINDS)},
                "message": STR,
                "requestId": {"type": "string", "pattern": "^req_"},
                "docUrl": {"type": "string", "description": "<docs base>/errors#<type>"},
            },
        }
    },
}


def families() -> list[str]:
    return sorted({k.split(".", 1)[0] + ".*" for k in EVENT_KINDS})


def webhooks() -> dict[str, Any]:
    """OpenAPI 3.1 ``webhooks``: what a partner's endpoint receives, one entry per event kind."""
    return {
        kind: {
            "post": {
                "summary": f"{kind} delivered to a subscribed endpoint (signed: X-Service-Signature)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref(event_schema_name(kind))}},
                },
                "responses": {"2XX": {"description": "received; anything else is retried"}},
            }
        }
        for kind in (*EVENT_KINDS, TEST_KIND.kind)
    }

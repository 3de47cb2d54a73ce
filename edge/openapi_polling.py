"""The OpenAPI operations of a polling endpoint's consumers (edge.blueprints.polling; docs/webhooks.md
"Polling"): their parameters, bodies and answers, built with the document's one operation builder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edge.blueprints.polling import DEFAULT_LEASE, DEFAULT_LIMIT, MAX_LEASE, MAX_LIMIT, MIN_LEASE
from edge.openapi_schemas import STR, TIME, id_param, query

POLLED_EVENT = {
    "type": "object",
    "description": "An event exactly as a push delivery's body carries it (its `data` by its kind's schema: "
    "`GET /v1/event-types`).",
    "required": ["id", "type"],
    "properties": {"id": STR, "type": STR},
}
POLL_SCHEMA = {
    "type": "object",
    "required": ["object", "data", "cursor", "leaseExpiresAt"],
    "properties": {
        "object": {"const": "webhook_poll"},
        "data": {"type": "array", "items": POLLED_EVENT, "maxItems": MAX_LIMIT},
        "cursor": {
            "type": ["string", "null"],
            "pattern": "^pcur_[0-9A-Za-z]{32}$",
            "description": "commit it before leaseExpiresAt; null when nothing was leased (data is empty)",
        },
        "leaseExpiresAt": TIME,
    },
}
COMMIT_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["cursor"],
    "properties": {
        "cursor": {
            "type": "string",
            "pattern": "^pcur_[0-9A-Za-z]{32}$",
            "description": "a poll's cursor (404: no batch of this endpoint has it; 409: its lease ran out)",
        }
    },
}
COMMIT_SCHEMA = {
    "type": "object",
    "required": ["object", "cursor", "committed"],
    "properties": {
        "object": {"const": "webhook_poll_commit"},
        "cursor": STR,
        "committed": {"type": "integer", "minimum": 0},
    },
}
LIMIT = query(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    f"the most events in the batch (default {DEFAULT_LIMIT})",
)
LEASE = query(
    "leaseSeconds",
    {"type": "integer", "minimum": MIN_LEASE, "maximum": MAX_LEASE},
    f"how long the batch is this consumer's before it is offered again (default {DEFAULT_LEASE})",
)


def polling_paths(op: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The two paths, each operation made by ``op`` (edge.openapi's builder)."""
    ep = [id_param("endpoint_id", "we")]
    return {
        "/v1/webhooks/endpoints/{endpoint_id}/poll": {
            "get": op(
                "pollWebhookEndpoint",
                "Lease a batch of a polling endpoint's events (commit its cursor before the lease runs out)",
                "webhooks:read",
                schema=POLL_SCHEMA,
                params=[*ep, LIMIT, LEASE],
                also=(409,),
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/poll/commit": {
            "post": op(
                "commitWebhookPoll",
                "Acknowledge a polled batch by its cursor (409: its lease ran out, the batch comes again)",
                "webhooks:read",
                schema=COMMIT_SCHEMA,
                params=ep,
                body=COMMIT_BODY,
                body_required=True,
            )
        },
    }

"""The OpenAPI 3.1 document of the edge, built from the fixed routes and the product route table.

It is a contract partners generate clients from, and what schemathesis checks the edge against
(tests/integration/test_edge_schemathesis.py): every status an operation can answer is declared with the
error body, request schemas say what the edge checks (edge.openapi_schemas), the product routes come from
the route table (edge.openapi_products), and links join an answer to the operations its ids feed
(edge.openapi_links).
"""

from __future__ import annotations

import re
from typing import Any

from edge.config import EdgeConfig
from edge.openapi_leaks import KEY_SELF_SCHEMA, KEY_SELF_TEXT, leak_paths
from edge.openapi_leaks import SECURITY_SCHEMES as LEAK_SECURITY
from edge.openapi_links import links
from edge.openapi_polling import polling_paths
from edge.openapi_products import builtin
from edge.openapi_schemas import (
    ACCOUNT_SCHEMA,
    ATTEMPT_SCHEMA,
    CLOCK_BODY,
    CLOCK_SCHEMA,
    CUSTOMER_SCHEMA,
    DELETED_SCHEMA,
    DELIVERY_SCHEMA,
    ENDPOINT_BODY,
    ENDPOINT_SCHEMA,
    ENDPOINT_UPDATE,
    ERROR_SCHEMA,
    EVENT_SCHEMA,
    EVENT_TYPE_SCHEMA,
    IDEMPOTENCY,
    LEDGER_SCHEMA,
    LIMIT,
    NO_FIELDS,
    OBJ,
    PAGE,
    RECOVER_BODY,
    RECOVERY_SCHEMA,
    REF_PATH,
    ROTATE_BODY,
    SAMPLE_BODY,
    SAMPLE_SCHEMA,
    SIGNING_KEY_SCHEMA,
    TEST_SEND_SCHEMA,
    TRIGGERS_TEXT,
    customer_ref,
    event_schema_name,
    event_schemas,
    families,
    id_param,
    list_of,
    product_param,
    query,
    query_id,
    ref,
    sandbox_trigger,
    webhooks,
)
from edge.openapi_usage import usage_paths
from edge.routetable import BUILTIN_SHAPES, ProductRoute
from edge.triggers import RouteKind
from svckit.errors import ERROR_KINDS
from svckit.events import EVENT_KINDS
from svckit.resources import PRODUCTS, read_scopes
from svckit.webhook_status import DeliveryStatus

__all__ = ["build_openapi", "event_schema_name", "event_schemas", "webhooks"]

# Every refusal an operation can answer, by status: what each means there.
STATUS_TEXT = {
    400: "invalid_request (a parameter, header or body the edge refuses; the message names it), "
    "missing_idempotency_key, invalid_customer_ref",
    401: "missing_api_key, invalid_api_key, environment_mismatch; during a certification run an injected "
    "invalid_api_key on the run key's POSTs (10 s of 401s)",
    402: "search_quota_exhausted (live searches), credit_exhausted (mode A creation)",
    403: "missing_scope, ip_not_allowed, account_read_only",
    404: "not_found: an unknown id, or one of another account or environment",
    406: "not_acceptable: Accept excludes application/json",
    409: "idempotency_key_in_use, or conflict: the resource's state does not allow it",
    413: "payload_too_large: the body is over the limit",
    415: "unsupported_media_type: a body that is not application/json",
    421: "misdirected_request: a Host this edge does not serve",
    422: "idempotency_key_reused: the Idempotency-Key was used for another request",
    429: "rate_limited: over the key's request rate; retry after Retry-After seconds. During a "
    "certification run also injected into the run key's POSTs, on the published schedule",
    503: "service_unavailable: a backend cannot be reached; retry (a POST with the same Idempotency-Key). "
    "During a certification run also injected into the run key's POSTs",
    504: "gateway_timeout: a backend did not answer in time; retry with the same Idempotency-Key. A POST "
    "of a certification run's key gets it on the run's published fault schedule (every 7th POST cycles "
    "503, 429, 504, 401; docs: sandbox, Go live)",
}
COMMON = (400, 401, 403, 404, 406, 413, 415, 421, 429, 503)
REQUEST_ID = {
    "description": "the request's id (also the error body's requestId)",
    "schema": {"type": "string"},
}


def _error_response(status: int) -> dict[str, Any]:
    headers: dict[str, Any] = {"X-Request-Id": REQUEST_ID}
    if status == 429:
        headers["Retry-After"] = {"required": True, "schema": {"type": "string", "pattern": "^[0-9]+$"}}
    return {
        "description": STATUS_TEXT[status],
        "headers": headers,
        "content": {"application/json": {"schema": ref("Error")}},
    }


def _op(
    op_id: str,
    summary: str,
    scope: str | None,
    ok: int = 200,
    schema: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    body_required: bool = False,
    kind: RouteKind = RouteKind.OTHER,
    also: tuple[int, ...] = (),
) -> dict[str, Any]:
    """One operation: its success answer, every refusal it can answer (``also``: beyond the ones every
    route can), and the headers the gate reads (Idempotency-Key on POST, X-Sandbox-Trigger)."""
    post = body is not None
    # A POST may also be answered 504: a backend timing out, or a certification run's injected fault.
    statuses = sorted({*COMMON, *also, *((409, 422, 504) if post else ())})
    op: dict[str, Any] = {
        "operationId": op_id,
        "summary": summary,
        "responses": {
            str(ok): {
                "description": "OK" if ok < 300 else "Accepted",
                "headers": {"X-Request-Id": REQUEST_ID},
                "content": {"application/json": {"schema": schema or OBJ}},
            },
            **{str(s): {"$ref": f"#/components/responses/Error{s}"} for s in statuses},
            "default": {"$ref": "#/components/responses/Error"},
        },
        "security": [{"svcKey": []}],
    }
    if scope:
        op["description"] = f"Required scope: `{scope}`."
        op["x-required-scope"] = scope
    else:
        op["description"] = "Any valid key; events are filtered by the key's scopes as on /v1/stream."
    trigger = sandbox_trigger(kind)
    op["parameters"] = [*(params or []), *([IDEMPOTENCY] if post else []), *([trigger] if trigger else [])]
    if body is not None:
        op["requestBody"] = {"required": body_required, "content": {"application/json": {"schema": body}}}
    return op


def _ledger_op() -> dict[str, Any]:
    op = _op(
        "getLedger",
        "Read the mode A credit balance and its entries, newest first",
        "account:read",
        schema=LEDGER_SCHEMA,
        params=[LIMIT, PAGE],
    )
    op["description"] = (
        "Required scope: `account:read`, or any product's read scope ("
        + ", ".join(f"`{s}`" for s in read_scopes(PRODUCTS))
        + "). Mode A accounts only (mode B: 404 not_found). The ledger is per environment: a test "
        "key reads the sandbox's, where bookings spend no credit."
    )
    return op


def _get_event_op() -> dict[str, Any]:
    op = _op(
        "getEvent",
        "Get one event of the last 30 days, whole (what a thin delivery names)",
        None,
        schema=EVENT_SCHEMA,
        params=[id_param("event_id", "evt")],
    )
    op["description"] = (
        "Any valid key whose scopes read the event's kind (a booking's `<product>:read`, an eSIM event's "
        "`esim:read`, the rest `account:read`: GET /v1/event-types); otherwise 403 missing_scope naming "
        "the scope. Every read is in the account's request log, never sampled away."
    )
    return op


def _key_self_ops() -> dict[str, Any]:
    get = _op(
        "getOwnKey", "Check the calling key: it works, and what it may do", None, schema=KEY_SELF_SCHEMA
    )
    delete = _op(
        "revokeOwnKey", "Revoke the calling key, at once, at every edge", None, schema=KEY_SELF_SCHEMA
    )
    for op in (get, delete):
        op["description"] = KEY_SELF_TEXT
    return {"get": get, "delete": delete}


def _certification_paths() -> dict[str, Any]:
    """A partner's certification runs (edge.blueprints.certification; docs/sandbox.md "Go live")."""
    sandbox = " Sandbox only (live: 404 not_found); any valid key."
    start = _op(
        "startCertificationRun",
        "Open a certification run for the calling sandbox key",
        None,
        ok=201,
        body={"type": "object", "properties": {"length": {"type": "string", "maxLength": 32}}},
    )
    start["description"] = "A run faults and records the calling key's requests until it ends." + sandbox
    latest = _op("getLatestCertificationRun", "Read the account's latest certification run", None)
    latest["description"] = "With `reportFile`, the signed report, once the run is finished." + sandbox
    finish = _op(
        "finishCertificationRun",
        "Finish a certification run: probe the webhook endpoints, evaluate the checks, sign the report",
        None,
        body={"type": "object", "properties": {}, "additionalProperties": False},
        params=[
            {
                "name": "run_id",
                "in": "path",
                "required": True,
                "description": "crun_..., or latest",
                "schema": {"type": "string", "pattern": "^(latest|crun_[A-Za-z0-9_]+)$"},
            }
        ],
    )
    finish["description"] = (
        "The run's probe deliveries go to the account's sandbox webhook endpoints first (each answered "
        "within 10 s; the call waits for them), then every check is evaluated and the report signed: "
        "the answer has `reportFile`. 409 conflict: the run is already finished (a run past its end is "
        "finished by the platform)." + sandbox
    )
    keys = _op("listCertificationKeys", "The platform's report-signing public keys", None)
    keys["description"] = "What `svc certify verify --keys` reads. Any valid key."
    return {
        "/v1/certification/runs": {"post": start},
        "/v1/certification/runs/latest": {"get": latest},
        "/v1/certification/runs/{run_id}/finish": {"post": finish},
        "/v1/certification/keys": {"get": keys},
    }


def _fixed_paths() -> dict[str, Any]:
    ep = [id_param("endpoint_id", "we")]
    endpoint_ref = ref("WebhookEndpoint")
    return {
        "/v1/account": {
            "get": _op(
                "getAccount",
                "Read own account, the calling key and today's search usage",
                "account:read",
                schema=ACCOUNT_SCHEMA,
            )
        },
        "/v1/ledger": {"get": _ledger_op()},
        "/v1/keys/self": _key_self_ops(),
        **_certification_paths(),
        "/v1/customers/{ref}": {
            "delete": _op(
                "deleteCustomer",
                "Remove the traveller record of a partner reference",
                "account:write",
                schema=CUSTOMER_SCHEMA,
                params=[REF_PATH],
            )
        },
        "/v1/webhooks/endpoints": {
            "get": _op(
                "listWebhookEndpoints",
                "List webhook endpoints",
                "webhooks:read",
                schema=list_of(endpoint_ref),
                params=[LIMIT, PAGE],
            ),
            "post": _op(
                "createWebhookEndpoint",
                "Register a webhook endpoint (the response carries its signing secret, once)",
                "webhooks:write",
                201,
                endpoint_ref,
                body=ENDPOINT_BODY,
                body_required=True,
            ),
        },
        "/v1/webhooks/endpoints/{endpoint_id}": {
            "get": _op(
                "getWebhookEndpoint",
                "Get a webhook endpoint",
                "webhooks:read",
                schema=endpoint_ref,
                params=ep,
            ),
            "post": _op(
                "updateWebhookEndpoint",
                "Update url, events, description, signatureScheme, ordering, filter, payload, "
                "receiverAuth or the destination (type, amqp, nats)",
                "webhooks:write",
                schema=endpoint_ref,
                params=ep,
                body=ENDPOINT_UPDATE,
                body_required=True,
            ),
            "delete": _op(
                "deleteWebhookEndpoint",
                "Delete a webhook endpoint",
                "webhooks:write",
                schema=DELETED_SCHEMA,
                params=ep,
            ),
        },
        "/v1/webhooks/signing-keys": {
            "get": _op(
                "listWebhookSigningKeys",
                "The public ed25519 keys of the Standard Webhooks v1a signatures",
                "webhooks:read",
                schema=list_of(SIGNING_KEY_SCHEMA),
                params=[query_id("endpoint", "we")],
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/rotate_secret": {
            "post": _op(
                "rotateWebhookSecret",
                "Rotate the signing secret; the old one stays valid for overlapSeconds (default 24 h)",
                "webhooks:write",
                schema=endpoint_ref,
                params=ep,
                body=ROTATE_BODY,
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/enable": {
            "post": _op(
                "enableWebhookEndpoint",
                "Re-enable a disabled endpoint",
                "webhooks:write",
                schema=endpoint_ref,
                params=ep,
                body=NO_FIELDS,
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/recover": {
            "post": _op(
                "recoverWebhookEndpoint",
                "Re-send what the endpoint missed since a time",
                "webhooks:write",
                schema=RECOVERY_SCHEMA,
                params=ep,
                body=RECOVER_BODY,
                body_required=True,
            )
        },
        "/v1/webhooks/endpoints/{endpoint_id}/test": {
            "post": _op(
                "sendWebhookTest",
                "Send a sample delivery to the endpoint",
                "webhooks:write",
                202,
                TEST_SEND_SCHEMA,
                params=ep,
                body=NO_FIELDS,
            )
        },
        "/v1/sandbox/events": {
            "post": _op(
                "sendSandboxEvent",
                "Sandbox only (404 on live): publish a sample event of a kind to the account's endpoints "
                "and stream",
                "webhooks:write",
                202,
                SAMPLE_SCHEMA,
                body=SAMPLE_BODY,
                body_required=True,
            )
        },
        "/v1/sandbox/clock/advance": {
            "post": _op(
                "advanceSandboxClock",
                "Sandbox only (404 on live): bring the account's sandbox delivery schedule forward",
                "webhooks:write",
                schema=CLOCK_SCHEMA,
                body=CLOCK_BODY,
                body_required=True,
            )
        },
        "/v1/webhooks/deliveries": {
            "get": _op(
                "listWebhookDeliveries",
                "List deliveries (one event to one endpoint)",
                "webhooks:read",
                schema=list_of(ref("WebhookDelivery")),
                params=[
                    query_id("endpoint", "we"),
                    query_id("event", "evt"),
                    query("status", {"enum": [s.value for s in DeliveryStatus]}),
                    LIMIT,
                    PAGE,
                ],
            )
        },
        "/v1/webhooks/attempts": {
            "get": _op(
                "listWebhookAttempts",
                "List delivery attempts (kept 30 days) with the response received",
                "webhooks:read",
                schema=list_of(ATTEMPT_SCHEMA),
                params=[
                    query_id("endpoint", "we"),
                    query_id("event", "evt"),
                    query_id("delivery", "msg"),
                    LIMIT,
                    PAGE,
                ],
            )
        },
        "/v1/webhooks/attempts/{attempt_id}/resend": {
            "post": _op(
                "resendWebhookAttempt",
                "Resend the delivery of an attempt now",
                "webhooks:write",
                202,
                ref("WebhookDelivery"),
                params=[id_param("attempt_id", "att")],
                body=NO_FIELDS,
            )
        },
        "/v1/events": {
            "get": _op(
                "listEvents",
                "List the account's events of the last 30 days, newest first",
                None,
                schema=list_of(EVENT_SCHEMA),
                params=[
                    query(
                        "type",
                        {"type": "array", "items": {"enum": [*EVENT_KINDS, *families(), "*"]}},
                        "event kinds or families (booking.*), repeated or comma-separated",
                    ),
                    query("created[gte]", {"type": "string", "format": "date-time"}, "RFC 3339, inclusive"),
                    query("created[lt]", {"type": "string", "format": "date-time"}, "RFC 3339, exclusive"),
                    {
                        **query_id("undeliveredTo", "we"),
                        "description": "only events whose delivery to this endpoint is held or failed "
                        "(needs webhooks:read)",
                    },
                    LIMIT,
                    PAGE,
                ],
            )
        },
        "/v1/events/{event_id}": {"get": _get_event_op()},
        "/v1/event-types": {
            "get": _op(
                "listEventTypes",
                "The event catalog: every event kind with its states, data schema and an example",
                "account:read",
                schema=list_of(ref("EventType")),
            )
        },
        "/v1/event-types/{kind}": {
            "get": _op(
                "getEventType",
                "One event kind of the catalog, e.g. booking.confirmed",
                "account:read",
                schema=ref("EventType"),
                params=[
                    {
                        "name": "kind",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": "^[a-z_]+\\.[a-z_]+$", "maxLength": 64},
                    }
                ],
            )
        },
        "/v1/stream": {
            "get": {
                "operationId": "openStream",
                "summary": "WebSocket stream of the account's events "
                "(Sec-WebSocket-Protocol: svc, <API_KEY>)",
                "description": "Any valid key; events are filtered by the key's scopes. See docs/edge.md.",
                "security": [{"svcKey": []}],
                "responses": {
                    "101": {"description": "Switching protocols (subprotocol svc)"},
                    "default": {"$ref": "#/components/responses/Error"},
                },
            }
        },
    }


_PARAM = re.compile(r"\{[^}]+\}")
_NAMES = {
    "search": "search{P}",
    "offer": "get{P}Offer",
    "create": "create{P}Booking",
    "get": "get{P}Booking",
    "modify": "modify{P}Booking",
    "cancel": "cancel{P}Booking",
    "plans": "listEsimPlans",
    "usage": "getEsimOrderUsage",
}


def _product_op(route: ProductRoute) -> dict[str, Any]:
    product = route.path.split("/")[2]
    action = BUILTIN_SHAPES.get((route.method, _PARAM.sub("{}", route.path)), "")
    if action and route.builtin_action:
        ok, schema, body = builtin(action, product)
    else:
        ok, schema, body = 200, OBJ, OBJ if route.method in ("POST", "PUT", "PATCH") else None
    if action:
        op_id = _NAMES[action].format(P=product.capitalize())
        if product == "esim" and action in ("create", "get"):
            op_id = op_id.replace("Booking", "Order")
    else:  # a deployment's own route: method and literal segments
        words = [w for w in re.split(r"[^A-Za-z0-9]+", _PARAM.sub("", route.path)) if w and w != "v1"]
        op_id = route.method.lower() + "".join(w.capitalize() for w in words)
    if route.method != "POST" and body is not None and route.method not in ("PUT", "PATCH"):
        body = None
    params: list[dict[str, Any]] = [product_param(p) for p in route.params]
    if route.traveller != "none":
        params.append(customer_ref(route.traveller == "required"))
    also = (402,) if route.search or route.creates else ()
    op = _op(
        op_id,
        route.summary or f"{route.method} {route.path}",
        route.scope,
        ok,
        schema,
        params,
        body if route.method == "POST" else None,
        body_required=bool(body and body.get("minProperties")),
        kind=route.kind,
        also=(*also, 409),
    )
    if route.search:
        op["description"] += " A search: counted against the daily allowance on live keys (402 when used up)."
    return op


def _add_links(paths: dict[str, Any]) -> None:
    ops = {op["operationId"]: op for item in paths.values() for op in item.values()}
    for (op_id, status), found in links(set(ops)).items():
        response = ops[op_id]["responses"].get(status)
        if response is not None and found:
            response["links"] = found


def build_openapi(config: EdgeConfig) -> dict[str, Any]:
    paths = _fixed_paths()
    for route in config.routes.routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _product_op(route)
    paths.update(leak_paths(config.secret_scanning))
    paths.update(polling_paths(_op))
    paths.update(usage_paths(_op))  # GET /v1/usage, /v1/usage/webhooks
    _add_links(paths)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "svc partner travel API (edge)",
            "version": "v1",
            "description": "Every request carries Authorization: Svc <API_KEY>. Errors: "
            + ", ".join(f"{t} ({k.http_status})" for t, k in ERROR_KINDS.items())
            + ". A known path asked with another method: 405 method_not_allowed with Allow. "
            + TRIGGERS_TEXT,
        },
        "paths": paths,
        "webhooks": webhooks(),
        "components": {
            "securitySchemes": {
                "svcKey": {
                    "type": "http",
                    "scheme": "Svc",
                    "description": "Authorization: Svc <API_KEY> (Bearer works too)",
                },
                **LEAK_SECURITY,
            },
            "responses": {
                "Error": {
                    "description": "Refusal or error (docs/errors.md)",
                    "headers": {"X-Request-Id": REQUEST_ID},
                    "content": {"application/json": {"schema": ref("Error")}},
                },
                **{f"Error{s}": _error_response(s) for s in STATUS_TEXT},
            },
            "schemas": {
                "EventType": EVENT_TYPE_SCHEMA,
                "WebhookEndpoint": ENDPOINT_SCHEMA,
                "WebhookDelivery": DELIVERY_SCHEMA,
                **event_schemas(),
                "Error": ERROR_SCHEMA,
            },
        },
    }

"""schemathesis hooks for running it against the edge (schemathesis.toml loads them): the test data a
schema cannot express, the way a partner's QA run would supply it.

- Idempotency-Key: the document says 1 to 255 printable ASCII characters, and that the same key with
  another request is 422 idempotency_key_reused. Generated keys repeat ("0" in every request of the
  coverage phase), so each valid key is made unique (a UUID); invalid and missing keys are kept, to be
  refused.
- page_token: only a value a list returned (``nextPageToken``) is one; a made-up one is 400. Dropped from
  requests meant to be valid.
- A webhook endpoint's url must resolve to an address webhookd may send to: a valid request gets
  ``SVC_QA_WEBHOOK_URL`` (default ``https://localhost:9/hook``: loopback, for a webhookd run with
  ``--allow-private-targets`` as scripts/run's is).
- A broker destination's host must resolve to an address webhookd may connect to, as a url must: a valid
  request gets ``SVC_QA_AMQP_URL`` (default ``amqp://guest@localhost:5672/%2F``) as ``amqp.url`` and
  ``SVC_QA_NATS_URL`` (default ``nats://localhost:4222``) as ``nats.servers``; a NATS ``token`` goes
  without ``user`` and ``password`` (webhookd refuses both at once), so a valid request with both drops it.
- GET /v1/usage and /v1/usage/webhooks: which ``from`` and ``to`` make a range depends on each other, on
  ``groupBy`` and on today (to after from, at most 731 days, whole hours or days, within the counts'
  retention: docs/edge.md "Usage"), which a schema cannot state; a valid request naming either asks for
  yesterday and today instead (what each value may be is tests/unit/test_edge_usage_range.py's).
- A webhook endpoint's receiverAuth (an http endpoint's: a polling or broker one has none), when meant
  to be valid, becomes a header of the QA run's and, when
  it had oauth2, credentials with ``SVC_QA_TOKEN_URL`` (default ``https://localhost:9/token``): what a
  certificate, token URL or header name means is checked by webhookd, not expressed by the schema.
- A query parameter made an object to be invalid is sent as its JSON text: the form style would explode
  it into keys of its own (an empty one into nothing), so the request would no longer carry it.
- A coverage case that leaves Authorization out is not touched: a changed case is revalidated as valid,
  and the run's ``-H Authorization`` would be sent with it again.
- A webhook endpoint's events: ``*`` is sent alone (with other kinds it is refused: it already means
  all of them), and the kinds for one commercial mode only (the items' ``x-account-mode``) are left out of
  requests meant to be valid (the QA account is of one mode; the other's kinds are refused, 400).
- A webhook endpoint's filter: the document bounds its top-level fields, but which operators and operands
  make a filter valid is a grammar (svckit.filtercheck) a JSON Schema does not hold, so an object made to
  be valid is replaced by one that is (``QA_FILTER``); null and invalid ones are kept.
- POST /v1/sandbox/events: a kind for the other commercial mode (the schema's ``x-account-mode``) is
  replaced by booking.confirmed, and ``data`` (checked against the kind's catalog schema merged with the
  sample's) is left out of requests meant to be valid.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import uuid
from typing import Any

import schemathesis
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.meta import CoverageScenario
from schemathesis.generation.modes import GenerationMode

_KEY = re.compile(r"[ -~]{1,255}")
QA_URL = os.environ.get("SVC_QA_WEBHOOK_URL", "https://localhost:9/hook")
QA_FILTER = {"data": {"product": {"$in": ["hotels", "flights"]}}}
QA_AMQP_URL = os.environ.get("SVC_QA_AMQP_URL", "amqp://guest@localhost:5672/%2F")
QA_NATS_URL = os.environ.get("SVC_QA_NATS_URL", "nats://localhost:4222")
QA_TOKEN_URL = os.environ.get("SVC_QA_TOKEN_URL", "https://localhost:9/token")


def _positive(case: Any, location: ParameterLocation) -> bool:
    meta = case.meta
    if meta is None:  # a stateful step or an explicit call: meant to be valid
        return True
    info = meta.components.get(location)
    return info is None or info.mode == GenerationMode.POSITIVE


def _drops_authorization(case: Any) -> bool:
    """A coverage case leaving Authorization out on purpose (the run's -H would put it back)."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    return (
        getattr(data, "scenario", None) == CoverageScenario.MISSING_PARAMETER
        and str(getattr(data, "parameter", "")).lower() == "authorization"
    )


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    if _drops_authorization(case):
        return  # any change would make schemathesis revalidate the case as valid and send the key again
    headers = case.headers
    if headers:
        key = headers.get("Idempotency-Key")
        if isinstance(key, str) and _KEY.fullmatch(key):
            headers["Idempotency-Key"] = str(uuid.uuid4())
    query = case.query
    if isinstance(query, dict) and "page_token" in query and _positive(case, ParameterLocation.QUERY):
        del query["page_token"]
    if isinstance(query, dict) and not _positive(case, ParameterLocation.QUERY):
        for name, value in query.items():
            if isinstance(value, dict):
                query[name] = json.dumps(value)
    if (
        isinstance(query, dict)
        and case.operation.path in ("/v1/usage", "/v1/usage/webhooks")
        and _positive(case, ParameterLocation.QUERY)
        and ("from" in query or "to" in query)
    ):
        query.pop("to", None)
        query["from"] = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    body = case.body
    if not isinstance(body, dict) or not _positive(case, ParameterLocation.BODY):
        return
    path = case.operation.path
    if path.startswith("/v1/webhooks/endpoints") and "url" in body:
        body["url"] = QA_URL
    if path.startswith("/v1/webhooks/endpoints") and isinstance(body.get("filter"), dict):
        body["filter"] = QA_FILTER
    if path.startswith("/v1/webhooks/endpoints") and isinstance(body.get("amqp"), dict):
        body["amqp"]["url"] = QA_AMQP_URL
    nats = body.get("nats")
    if path.startswith("/v1/webhooks/endpoints") and isinstance(nats, dict):
        nats["servers"] = [QA_NATS_URL]
        if nats.get("token") and (nats.get("user") or nats.get("password")):
            del nats["token"]
    if (
        path.startswith("/v1/webhooks/endpoints")
        and isinstance(body.get("receiverAuth"), dict)
        and body.get("type") in (None, "http")
    ):
        # What a receiver's authentication says (a certificate that parses, a token URL that resolves, a
        # header name that is not ours) is not in the schema: a valid one of each checkable part.
        qa: dict[str, Any] = {"headers": {"X-Qa-Run": "1"}}
        if body["receiverAuth"].get("oauth2") is not None:
            qa["oauth2"] = {"tokenUrl": QA_TOKEN_URL, "clientId": "qa", "clientSecret": "qa-secret"}
        body["receiverAuth"] = qa
    events = body.get("events")
    if path.startswith("/v1/webhooks/endpoints") and isinstance(events, list) and events:
        schema = case.operation.definition.raw["requestBody"]["content"]["application/json"]["schema"]
        items = schema.get("properties", {}).get("events", {}).get("items", {})
        mode_only = items.get("x-account-mode", {})
        kept = ["*"] if "*" in events else [e for e in events if e not in mode_only]
        body["events"] = kept or ["booking.confirmed"]
    if path == "/v1/sandbox/events":
        body.pop("data", None)
        modes = case.operation.definition.raw["requestBody"]["content"]["application/json"]["schema"]
        if body.get("type") in modes["properties"]["type"].get("x-account-mode", {}):
            body["type"] = "booking.confirmed"

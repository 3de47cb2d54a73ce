"""/openapi.json describes the whole edge (OpenAPI 3.1), and schemathesis drives every operation of it
against a real edge process (with real authsvc, webhookd and a product upstream): no 5xx, every status
and body as documented. Examples are bounded so this stays well under a minute."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from edge.testing import SANDBOX_HOST, Upstream, edge_args
from svckit.scopes import ALL_SCOPES
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc


async def make_key(target: str) -> str:
    """A sandbox key with every scope, of a new account (also tests/integration/test_edge_contract.py's)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        acct = await stub.CreateAccount(pb.CreateAccountRequest(name="QA", actor=pb.Actor(user="qa")))
        key: pb.CreateKeyResponse = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=acct.account.id,
                environment=pb.ENVIRONMENT_SANDBOX,
                scopes=list(ALL_SCOPES),
                actor=pb.Actor(user="qa"),
            )
        )
        return key.secret


@dataclass
class Api:
    base_url: str
    secret: str
    document: dict[str, Any]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    tmp = tmp_path_factory.mktemp("edge_openapi")
    up_live, up_sandbox = Upstream("live"), Upstream("sandbox")
    routes = tmp / "routes.json"
    ups = {"live": up_live.url, "sandbox": up_sandbox.url}
    routes.write_text(
        json.dumps(
            [
                {
                    "method": "GET",
                    "path": "/v1/hotels/search",
                    "scope": "hotels:read",
                    "search": True,
                    "upstream": ups,
                },
                {
                    "method": "GET",
                    "path": "/v1/flights/offers/{offer_id}",
                    "scope": "flights:read",
                    "upstream": ups,
                },
                {"method": "POST", "path": "/v1/esim/orders", "scope": "esim:write", "upstream": ups},
            ]
        )
    )
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        wh = start_service("webhookd", tmp, sqlite_url(tmp, "w.db"))
        procs.append(wh)
        edge = ServiceProcess(
            "edge", edge_args(auth.grpc_target, wh.grpc_target, f"sqlite+aiosqlite:///{tmp / 'e.db'}", routes)
        ).start(tmp / "edge.log")
        procs.append(edge)

        secret = asyncio.run(make_key(auth.grpc_target))
        base = f"http://127.0.0.1:{edge.ports['sandbox_port']}"
        doc = httpx.get(base + "/openapi.json", headers={"Host": SANDBOX_HOST}).json()
        yield Api(base, secret, doc)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        up_live.close()
        up_sandbox.close()


def test_document_covers_every_route(api: Api) -> None:
    doc = api.document
    assert doc["openapi"] == "3.1.0"
    assert doc["servers"] == [{"url": f"http://{SANDBOX_HOST}", "description": "this host (sandbox)"}]
    ops = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    expected = {
        ("GET", "/v1/account"),
        ("DELETE", "/v1/customers/{ref}"),
        ("GET", "/v1/webhooks/endpoints"),
        ("POST", "/v1/webhooks/endpoints"),
        ("GET", "/v1/webhooks/endpoints/{endpoint_id}"),
        ("POST", "/v1/webhooks/endpoints/{endpoint_id}"),
        ("DELETE", "/v1/webhooks/endpoints/{endpoint_id}"),
        ("POST", "/v1/webhooks/endpoints/{endpoint_id}/rotate_secret"),
        ("POST", "/v1/webhooks/endpoints/{endpoint_id}/enable"),
        ("POST", "/v1/webhooks/endpoints/{endpoint_id}/recover"),
        ("POST", "/v1/webhooks/endpoints/{endpoint_id}/test"),
        ("POST", "/v1/sandbox/events"),
        ("POST", "/v1/sandbox/clock/advance"),
        ("GET", "/v1/webhooks/deliveries"),
        ("GET", "/v1/webhooks/attempts"),
        ("GET", "/v1/webhooks/signing-keys"),
        ("GET", "/v1/webhooks/endpoints/{endpoint_id}/poll"),
        ("POST", "/v1/webhooks/endpoints/{endpoint_id}/poll/commit"),
        ("POST", "/v1/webhooks/attempts/{attempt_id}/resend"),
        ("GET", "/v1/stream"),
        ("GET", "/v1/events"),
        ("GET", "/v1/ledger"),
        ("GET", "/v1/usage"),
        ("GET", "/v1/usage/webhooks"),
        ("POST", "/v1/certification/runs"),
        ("GET", "/v1/certification/runs/latest"),
        ("POST", "/v1/certification/runs/{run_id}/finish"),
        ("GET", "/v1/certification/keys"),
        ("GET", "/v1/events/{event_id}"),
        ("GET", "/v1/event-types"),
        ("GET", "/v1/event-types/{kind}"),
        ("GET", "/v1/hotels/search"),
        ("GET", "/v1/flights/offers/{offer_id}"),
        ("POST", "/v1/esim/orders"),
        ("GET", "/v1/keys/self"),
        ("DELETE", "/v1/keys/self"),
        ("POST", "/v1/secret-scanning/github"),
        ("GET", "/v1/secret-scanning/gitlab/revocable_token_types"),
        ("POST", "/v1/secret-scanning/gitlab/revoke_tokens"),
    }
    assert ops == expected
    scopes = {
        (m.upper(), p): op.get("x-required-scope")
        for p, item in doc["paths"].items()
        for m, op in item.items()
    }
    assert scopes[("POST", "/v1/webhooks/endpoints/{endpoint_id}/test")] == "webhooks:write"
    assert scopes[("GET", "/v1/webhooks/attempts")] == "webhooks:read"
    assert scopes[("DELETE", "/v1/customers/{ref}")] == "account:write"
    attempts = doc["paths"]["/v1/webhooks/attempts"]["get"]["responses"]["200"]["content"]
    attempt = attempts["application/json"]["schema"]["properties"]["data"]["items"]
    assert attempt["properties"]["responseHeaders"]["type"] == "object"
    assert "responseHeaders" in attempt["required"]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            # The secret scanners' reports are signed (GitHub) or token-authenticated (GitLab), not API
            # calls: no Idempotency-Key (a report sent again changes nothing anyway).
            if method == "post" and not path.startswith("/v1/secret-scanning/"):
                assert any(p["name"] == "Idempotency-Key" for p in op["parameters"]), path
                # What a certification run's fault schedule can answer any POST (docs: sandbox, Go live).
                assert {"401", "429", "503", "504"} <= set(op["responses"]), path
    timeout = doc["components"]["responses"]["Error504"]
    assert "gateway_timeout" in timeout["description"] and "certification" in timeout["description"]


def test_every_operation_conforms(api: Api) -> None:
    """schemathesis's pytest plugin does not load under this pytest; drive its strategies with hypothesis."""
    doc = dict(api.document)
    doc["paths"] = {p: item for p, item in doc["paths"].items() if p != "/v1/stream"}  # WebSocket only
    # DELETE /v1/keys/self would revoke the key every later case runs with (test_leak_routes.py tests it).
    doc["paths"]["/v1/keys/self"] = {"get": doc["paths"]["/v1/keys/self"]["get"]}
    # Opening a certification run would fault the later cases' POSTs (test_edge_certification.py tests it).
    del doc["paths"]["/v1/certification/runs"]
    schema = schemathesis.openapi.from_dict(doc)
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]
    headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {api.secret}"}
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # (an Err is a schema the document failed to describe)
        operations.append(result.ok())
    statuses: list[int] = []
    assert len(operations) == 36  # 29, polling's 2, usage's 2, certification's 4 but opening a run
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=8,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            resp = case.call_and_validate(base_url=api.base_url, headers=headers, checks=checks, timeout=10)
            statuses.append(resp.status_code)

        run()
    # It really exercised the edge: successes and refusals both.
    assert len(statuses) >= 50
    assert any(200 <= s < 300 for s in statuses) and any(400 <= s < 500 for s in statuses)
    assert all(s < 500 for s in statuses)


def test_event_payloads_come_from_the_catalog(api: Api) -> None:
    """Every event kind's envelope is a component with the catalog's data schema, used by the events
    read back and by the document's webhooks (what an endpoint receives)."""
    from edge.openapi import event_schema_name
    from svckit.catalog import TEST_KIND, envelope_schema, example_envelope
    from svckit.events import EVENT_KINDS

    doc = api.document
    schemas = doc["components"]["schemas"]
    kinds = [*EVENT_KINDS, TEST_KIND.kind]
    for kind in kinds:
        component = schemas[event_schema_name(kind)]
        assert component["properties"]["data"] == envelope_schema(kind)["properties"]["data"], kind
        webhook = doc["webhooks"][kind]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert webhook == {"$ref": f"#/components/schemas/{event_schema_name(kind)}"}
    assert event_schema_name("search_quota.threshold") == "SearchQuotaThresholdEvent"
    read_back = doc["paths"]["/v1/events/{event_id}"]["get"]["responses"]["200"]["content"]
    assert len(read_back["application/json"]["schema"]["oneOf"]) == len(EVENT_KINDS)
    # The document's schemas validate the catalog's examples as JSON Schema 2020-12 (refs resolved
    # against the document's components) and refuse a field a kind does not have.
    from jsonschema import Draft202012Validator

    one_of = Draft202012Validator(
        {**read_back["application/json"]["schema"], "components": doc["components"]}
    )
    for kind in EVENT_KINDS:
        envelope = example_envelope(kind)
        one_of.validate(envelope)
        assert not one_of.is_valid({**envelope, "data": {**envelope["data"], "madeUp": 1}}), kind

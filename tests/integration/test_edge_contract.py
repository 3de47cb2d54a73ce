"""The OpenAPI document as a contract (issue 23), against one real edge with the built-in simulator (real
authsvc and webhookd processes):

- schemathesis with every check (positive and negative data, unsupported methods, stateful links): zero
  failures. It runs the schemathesis CLI as a partner's QA engineer would, with the repository's hooks
  (tests/schemathesis_hooks.py), on the document the edge serves; the edge has no request-rate limit
  here, so the run is bounded by its example counts, not by 429s.
- clients generated from the served document, as partners generate them: Python (openapi-python-client)
  and TypeScript (openapi-typescript + openapi-fetch, type-checked by tsc; skipped without node), each
  creating a webhook endpoint, booking a sandbox hotel with an Idempotency-Key and reading the error body
  of a refused call.

The edge listens on a port chosen first and serves it as a sandbox Host, so clients need no Host header
(node's fetch cannot set one).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from edge.testing import SANDBOX_HOSTS, edge_args
from tests.integration.test_edge_openapi import make_key
from tests.support import ROOT, ServiceProcess, free_port, sqlite_url, start_service


@dataclass
class Edge:
    base_url: str
    secret: str
    document: dict[str, Any]


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    """authsvc, webhookd (private targets allowed: the hooks' webhook url is loopback) and an edge on the
    default route table, whose sandbox upstream is the built-in simulator."""
    tmp = tmp_path_factory.mktemp("edge_schemathesis")
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        wh = start_service("webhookd", tmp, sqlite_url(tmp, "w.db"), "--allow-private-targets")
        procs.append(wh)
        port = free_port()
        args = edge_args(auth.grpc_target, wh.grpc_target, f"sqlite+aiosqlite:///{tmp / 'e.db'}")
        extra = [
            "--sandbox-listen",
            f"127.0.0.1:{port}",
            "--sandbox-hosts",
            f"127.0.0.1:{port},{SANDBOX_HOSTS}",
        ]
        extra += ["--rate-limit-sandbox", "0", "--sandbox-confirm-seconds", "0.2"]
        edge = ServiceProcess("edge", [*args, *extra]).start(tmp / "edge.log")
        procs.append(edge)
        secret = asyncio.run(make_key(auth.grpc_target))
        base = f"http://127.0.0.1:{port}"
        doc = httpx.get(base + "/openapi.json").json()
        yield Edge(base, secret, doc)
    finally:
        for proc in reversed(procs):
            proc.terminate()


def test_unknown_method_on_a_known_path_is_405_with_allow(edge: Edge) -> None:
    """RFC 9110: 405 with Allow for a path some route answers; 404 stays for a path none does."""
    headers = {"Authorization": f"Svc {edge.secret}"}
    cases = {
        ("TRACE", "/v1/account"): "GET, HEAD",
        ("PUT", "/v1/account"): "GET, HEAD",
        ("PATCH", "/v1/webhooks/endpoints/we_x"): "DELETE, GET, HEAD, POST",
        ("DELETE", "/v1/hotels/search"): "GET, HEAD",  # a product route (the route table)
        ("PUT", "/v1/hotels/bookings/bk_1"): "GET, HEAD",
    }
    with httpx.Client(base_url=edge.base_url, headers=headers) as client:
        for (method, path), allow in cases.items():
            resp = client.request(method, path)
            assert resp.status_code == 405, (method, path, resp.text)
            assert resp.headers["allow"] == allow
            error = resp.json()["error"]
            assert error["type"] == "method_not_allowed" and allow in error["message"]
            assert error["docUrl"].endswith("/docs/errors#method_not_allowed")
            assert httpx.get(error["docUrl"]).status_code == 200  # the anchor's page, served by the edge
        for method, path in (("TRACE", "/v1/nothing/here"), ("GET", "/v1/hotels/nothing")):
            assert client.request(method, path).status_code == 404


def test_what_schemathesis_found_the_edge_answers_as_documented(edge: Edge) -> None:
    """Schema-valid requests the edge refused, and invalid ones it took, before issue 23."""
    headers = {"Authorization": f"Svc {edge.secret}"}
    with httpx.Client(base_url=edge.base_url, headers=headers) as client:
        same = "2000-01-01T00:00:00Z"
        empty = client.get("/v1/events", params={"created[gte]": same, "created[lt]": same})
        assert empty.status_code == 200 and empty.json()["data"] == []  # an empty range, not a 400
        for params in (
            {"created[lt]": ""},
            {"created[lt]": "2000-01-01"},  # ISO 8601, not RFC 3339 date-time
            {"type": ""},
            {"limit": ""},
        ):
            assert client.get("/v1/events", params=params).status_code == 400, params
        for path, params in (
            ("/v1/webhooks/deliveries", {"status": ""}),
            ("/v1/webhooks/deliveries", {"limit": ""}),
            ("/v1/webhooks/attempts", {"limit": ""}),
        ):
            assert client.get(path, params=params).status_code == 400, (path, params)
        assert client.get("/v1/webhooks/attempts", params={"endpoint": ""}).status_code == 200  # no filter
        created = client.post(
            "/v1/webhooks/endpoints",
            headers={"Idempotency-Key": str(uuid.uuid4())},
            json={"url": "https://localhost:9/hook", "events": ["booking.confirmed"]},
        )
        assert created.status_code == 201, created.text
        rotated = client.post(
            f"/v1/webhooks/endpoints/{created.json()['id']}/rotate_secret",
            headers={"Idempotency-Key": str(uuid.uuid4())},
            json={"overlapSeconds": 60.0},  # a JSON Schema integer
        )
        assert rotated.status_code == 200, rotated.text


def test_document_declares_what_the_edge_answers(edge: Edge) -> None:
    paths = edge.document["paths"]
    create = paths["/v1/hotels/bookings"]["post"]
    assert {"202", "400", "401", "402", "403", "404", "409", "413", "415", "422", "429", "503"} <= set(
        create["responses"]
    )
    names = {p["name"]: p for p in create["parameters"]}
    assert names["Idempotency-Key"]["required"] and names["X-Partner-Customer-Ref"]["required"]
    assert "booking_failed" in names["X-Sandbox-Trigger"]["schema"]["enum"]
    links = create["responses"]["202"]["links"]
    assert {link["operationId"] for link in links.values()} == {
        "getHotelsBooking",
        "modifyHotelsBooking",
        "cancelHotelsBooking",
    }
    endpoint_links = paths["/v1/webhooks/endpoints"]["post"]["responses"]["201"]["links"]
    assert {"getWebhookEndpoint", "deleteWebhookEndpoint"} <= {
        link["operationId"] for link in endpoint_links.values()
    }
    sample = paths["/v1/sandbox/events"]["post"]["requestBody"]
    assert sample["required"] and sample["content"]["application/json"]["schema"]["required"] == ["type"]
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_schemathesis_every_check_finds_nothing(edge: Edge, tmp_path: Any) -> None:
    doc = dict(edge.document)
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(doc))
    report = tmp_path / "report"
    # The repository's schemathesis.toml (hooks, rate limit) with deeper stateful runs and no rate limit:
    # the edge here has none.
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f'hooks = "{ROOT / "tests" / "schemathesis_hooks.py"}"\n\n'
        "[phases.stateful]\nmax-steps = 6\n\n[phases.stateful.generation]\nmax-examples = 12\n"
    )
    cmd = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color",
        "run", str(schema),
        "--url", edge.base_url,
        "-H", f"Authorization: Svc {edge.secret}",
        "--checks", "all",
        "--exclude-path", "/v1/stream",  # WebSocket only
        "--exclude-operation-id", "revokeOwnKey",  # it would revoke the key every later case runs with
        # A run would inject its documented faults into every later case's POSTs (its own tests cover it).
        "--exclude-operation-id", "startCertificationRun",
        "--exclude-operation-id", "finishCertificationRun",
        "--max-examples", "2",
        "--generation-deterministic",
        "--report", "ndjson", "--report-dir", str(report),
    ]  # fmt: skip
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    (tmp_path / "schemathesis.txt").write_text(out.stdout)
    summary = out.stdout[-6000:]
    assert out.returncode == 0, summary + out.stderr[-2000:]
    assert "No issues found" in out.stdout or " passed" in out.stdout, summary
    # It really ran: every phase, and stateful steps followed the links.
    events = [json.loads(line) for f in report.glob("*.ndjson") for line in f.read_text().splitlines()]
    phases = {e["ScenarioFinished"]["phase"] for e in events if "ScenarioFinished" in e}
    assert {"coverage", "fuzzing", "stateful"} <= phases, phases
    covered = re.search(r"API Links:\s+(\d+) covered", out.stdout)
    assert covered and int(covered.group(1)) >= 5, summary
    assert re.search(r"(\d+) generated, \1 passed", out.stdout), summary


@pytest.fixture(scope="module")
def document_file(edge: Edge, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The served document, once per module (the generators read files)."""
    path = tmp_path_factory.mktemp("clients") / "openapi.json"
    path.write_text(json.dumps(edge.document))
    return path


def test_generated_python_client(edge: Edge, document_file: Any) -> None:
    out = document_file.parent / "python"
    cmd = [str(pathlib.Path(sys.executable).parent / "openapi-python-client"), "generate"]
    cmd += ["--path", str(document_file), "--meta", "none", "--output-path", str(out / "svc_client")]
    # (it formats its output with the venv's ruff)
    env = {
        **os.environ,
        "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(out))
    try:
        svc: Any = importlib.import_module("svc_client")
        api = importlib.import_module("svc_client.api.default")
        models: Any = importlib.import_module("svc_client.models")
        for name in ("create_webhook_endpoint", "create_hotels_booking", "get_hotels_booking"):
            importlib.import_module(f"svc_client.api.default.{name}")
        client = svc.AuthenticatedClient(base_url=edge.base_url, token=edge.secret, prefix="Svc")
        body = models.CreateWebhookEndpointBody(
            url="https://localhost:9/hook",
            events=[models.CreateWebhookEndpointBodyEventsItem.BOOKING_CONFIRMED],
        )
        endpoint = api.create_webhook_endpoint.sync(
            client=client, body=body, idempotency_key=str(uuid.uuid4())
        )
        assert endpoint.id.startswith("we_") and endpoint.secret.startswith("whsec_")
        key = str(uuid.uuid4())
        booking = api.create_hotels_booking.sync_detailed(
            client=client,
            body=models.CreateHotelsBookingBody(offer="off_hotels_1"),
            idempotency_key=key,
            x_partner_customer_ref="cust-py-1",
        )
        assert booking.status_code == 202 and booking.parsed.id.startswith("bk_test_"), booking.content
        replay = api.create_hotels_booking.sync_detailed(
            client=client,
            body=models.CreateHotelsBookingBody(offer="off_hotels_1"),
            idempotency_key=key,
            x_partner_customer_ref="cust-py-1",
        )
        assert replay.parsed.id == booking.parsed.id and replay.headers["idempotent-replayed"] == "true"
        refused = api.get_hotels_booking.sync_detailed(client=client, booking_id="bk_unknown")
        assert refused.status_code == 404 and isinstance(refused.parsed, models.Error)
        assert refused.parsed.error.type_ == "not_found", refused.content
        assert refused.parsed.error.doc_url.endswith("/docs/errors#not_found")
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "svc_client" or m.startswith("svc_client.")]:
            del sys.modules[name]


NODE_BIN = ROOT / "node_modules" / ".bin"


@pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_BIN / "openapi-typescript").exists(),
    reason="node or the npm tools (scripts/_bootstrap.sh) are missing",
)
def test_generated_typescript_client(edge: Edge, document_file: Any) -> None:
    work = document_file.parent / "typescript"
    work.mkdir()
    (work / "node_modules").symlink_to(ROOT / "node_modules")  # openapi-fetch, for tsc and node
    shutil.copy(pathlib.Path(__file__).with_name("openapi_client.mts"), work / "client.mts")
    env = {**os.environ, "NO_COLOR": "1"}
    steps = [
        [str(NODE_BIN / "openapi-typescript"), str(document_file), "-o", "schema.d.ts"],
        [str(NODE_BIN / "tsc"), "--strict", "--noEmitOnError", "--skipLibCheck", "--target", "es2022",
         "--lib", "es2022,dom", "--module", "nodenext", "--moduleResolution", "nodenext", "client.mts"],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run(step, cwd=work, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    run = subprocess.run(
        ["node", "client.mjs", edge.base_url, edge.secret],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["endpoint"].startswith("we_") and seen["secret"] is True
    assert seen["booking"].startswith("bk_test_") and seen["state"] == "pending"
    assert seen["status"] == 404 and seen["error"] == "not_found"
    assert seen["docUrl"].endswith("/docs/errors#not_found")

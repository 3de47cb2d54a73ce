"""The reference product service behind the edge, every hop authenticated: authsvc, webhookd, the edge
and examples.hotels as real processes with certificates of one development CA; the edge calls the
hotels upstream over HTTPS with its client certificate, the hotels service calls authsvc and webhookd
over gRPC with its own (``product:hotels``); a live booking through the edge reaches the partner's HTTPS
receiver as a signed ``booking.confirmed``. Every process exports its spans over OTLP/HTTP to a small
collector here: one booking is one trace.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jsonschema
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from svckit.clients import AuthClient
from svckit.edgeassertion import HEADER, claims_for, sign
from svckit.eventkinds import schema
from svckit.scopes import ALL_SCOPES
from svckit.secretbox import new_key
from tests.support import ServiceProcess, sqlite_url, tls_args, tls_of
from travel.auth.v1 import auth_pb2 as pb
from webhookd import verify
from webhookd.testing import Receiver, trusted_receiver

EDGE_KEY = Ed25519PrivateKey.generate()


class Collector:
    """An OTLP/HTTP traces endpoint: keeps each export's spans as (service, name, trace id, attributes)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                )

                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                export = ExportTraceServiceRequest.FromString(body)
                with collector.lock:
                    for resource in export.resource_spans:
                        attrs = {a.key: a.value.string_value for a in resource.resource.attributes}
                        for scope in resource.scope_spans:
                            for s in scope.spans:
                                values = {a.key: a.value.string_value for a in s.attributes}
                                row = (attrs["service.name"], s.name, s.trace_id.hex(), values)
                                collector.spans.append(row)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Stack:
    edge: ServiceProcess
    hotels: ServiceProcess
    asserted: ServiceProcess  # the sandbox upstream, started with the edge's public key
    authsvc: ServiceProcess
    receiver: Receiver
    collector: Collector
    pki: pathlib.Path
    procs: list[ServiceProcess] = field(default_factory=list)

    @property
    def live(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['live_port']}"

    @property
    def sandbox(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['sandbox_port']}"

    @property
    def hotels_url(self) -> str:
        return f"https://127.0.0.1:{self.hotels.ports['port']}"

    @property
    def asserted_url(self) -> str:
        return f"https://127.0.0.1:{self.asserted.ports['port']}"


def _routes(path: pathlib.Path, live: str, sandbox: str) -> pathlib.Path:
    up = {"live": live, "sandbox": sandbox}
    routes = [
        {"method": "GET", "path": "/v1/hotels/search", "scope": "hotels:read", "search": True,
         "upstream": up},
        {"method": "POST", "path": "/v1/hotels/bookings", "scope": "hotels:write", "creates": True,
         "traveller": "optional", "upstream": up},
        {"method": "GET", "path": "/v1/hotels/bookings/{booking_id}", "scope": "hotels:read", "upstream": up},
    ]  # fmt: skip
    path.write_text(json.dumps({"routes": routes}))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, pki: pathlib.Path) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("product-upstream")
    receiver, ca_file = trusted_receiver(tmp)
    collector = Collector()
    secrets_key = tmp / "webhookd-secrets.key"
    secrets_key.write_text(new_key())
    procs: list[ServiceProcess] = []

    def start(module: str, args: list[str], identity: str, prefix: str, log: str = "") -> ServiceProcess:
        env = {f"{prefix}_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        proc = ServiceProcess(module, args, env=env, tls=tls_args(pki, identity))
        procs.append(proc.start(tmp / f"{log or module}.log"))
        return proc

    # The edge's assertion key: the sandbox hotels upstream believes its signed assertion, not a peer.
    (tmp / "edge-upstream.key").write_bytes(
        EDGE_KEY.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    )
    (tmp / "edge-upstream.pub").write_bytes(
        EDGE_KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    )

    grpc = ["--listen", "127.0.0.1:0", "--metrics-listen", ""]
    try:
        webhookd = start(
            "webhookd",
            [*grpc, "--database", sqlite_url(tmp, "webhookd.db"), "--allow-private-targets",
             "--ca-bundle", str(ca_file), "--poll-seconds", "0.2", "--secrets-key-file", str(secrets_key)],
            "webhookd", "WEBHOOKD",
        )  # fmt: skip
        authsvc = start(
            "authsvc",
            [*grpc, "--database", sqlite_url(tmp, "authsvc.db"), "--webhookd", webhookd.grpc_target],
            "authsvc", "AUTHSVC",
        )  # fmt: skip
        peers = [
            "--listen",
            "127.0.0.1:0",
            "--authsvc",
            authsvc.grpc_target,
            "--webhookd",
            webhookd.grpc_target,
        ]
        # The two hotels processes start side by side (each start waits for its READY line).
        with ThreadPoolExecutor(2) as pool:
            starting = pool.submit(start, "examples.hotels", peers, "product:hotels", "HOTELS")
            asserted = start(
                "examples.hotels", [*peers, "--edge-public-key", str(tmp / "edge-upstream.pub")],
                "product:hotels", "HOTELS", "hotels-asserted",
            )  # fmt: skip
            hotels = starting.result()
        routes = _routes(
            tmp / "routes.json",
            f"https://127.0.0.1:{hotels.ports['port']}",
            f"https://127.0.0.1:{asserted.ports['port']}",
        )
        edge = start(
            "edge",
            edge_args(
                authsvc.grpc_target, webhookd.grpc_target, sqlite_url(tmp, "edge.db"), routes,
                "--upstream-signing-key-file", str(tmp / "edge-upstream.key"),
            ),
            "edge", "EDGE",
        )  # fmt: skip
        yield Stack(edge, hotels, asserted, authsvc, receiver, collector, pki, procs)
    finally:
        for proc in procs:  # all told at once, then each waited for
            if proc.proc is not None and proc.proc.poll() is None:
                proc.proc.send_signal(signal.SIGTERM)
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()
        collector.close()


async def _wait_for(predicate: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def partner(
    stack: Stack,
    name: str,
    mode: pb.AccountMode.ValueType,
    environment: pb.Environment.ValueType,
    scopes: list[str],
) -> tuple[pb.Account, pb.CreateKeyResponse]:
    """An account of ``mode`` and a key of ``environment`` with ``scopes``, made by svcctl."""
    async with AuthClient(stack.authsvc.grpc_target, tls_of(stack.pki, "svcctl")) as auth:
        actor = pb.Actor(user="ops:e2e")
        account = (
            await auth.create_account(
                pb.CreateAccountRequest(name=name, mode=mode, actor=actor), wait_for_ready=True
            )
        ).account
        if mode == pb.ACCOUNT_MODE_A:  # live mode A bookings hold credit (examples.hotels.with_credit)
            await auth.set_credit_limit(
                pb.SetCreditLimitRequest(
                    account_id=account.id, environment=environment, credit_limit=1_000_000, currency="EUR",
                    actor=actor,
                )
            )  # fmt: skip
        created = await auth.create_key(
            pb.CreateKeyRequest(
                account_id=account.id,
                environment=environment,
                name=pb.Environment.Name(environment).removeprefix("ENVIRONMENT_").lower(),
                scopes=scopes,
                actor=actor,
            )
        )
    return account, created


async def test_a_live_booking_through_the_edge_reaches_the_partner_signed(stack: Stack) -> None:
    account, created = await partner(
        stack, "Hotels Partner", pb.ACCOUNT_MODE_A, pb.ENVIRONMENT_LIVE, list(ALL_SCOPES)
    )
    secret = created.secret
    headers = {"Host": LIVE_HOST, "Authorization": f"Svc {secret}", "Accept": "application/json"}
    async with httpx.AsyncClient(base_url=stack.live, timeout=15) as http:
        endpoint = await http.post(
            "/v1/webhooks/endpoints",
            headers={**headers, "Idempotency-Key": "reg-1"},
            json={"url": stack.receiver.url("/hooks"), "events": ["booking.confirmed"]},
        )
        assert endpoint.status_code == 201, endpoint.text
        signing_secret = endpoint.json()["secret"]

        search = await http.get("/v1/hotels/search", headers=headers)
        assert search.status_code == 200, search.text
        assert [o["id"] for o in search.json()["data"]] == ["off_hotels_1", "off_hotels_2", "off_hotels_3"]
        assert search.json()["data"][0]["livemode"] is True

        book = {**headers, "Idempotency-Key": "book-1"}
        booked = await http.post("/v1/hotels/bookings", headers=book, json={"offer": "off_hotels_2"})
        assert booked.status_code == 201, booked.text
        booking, rid = booked.json(), booked.headers["x-request-id"]
        assert (booking["state"], booking["offer"], booking["amount"]) == ("confirmed", "off_hotels_2", 41200)
        assert booking["hold"].startswith("hold_")

        # The same key again (a partner retry): the same booking, no second event.
        again = await http.post("/v1/hotels/bookings", headers=book, json={"offer": "off_hotels_2"})
        assert again.json()["id"] == booking["id"]
        read = await http.get(f"/v1/hotels/bookings/{booking['id']}", headers=headers)
        assert read.status_code == 200 and read.json()["id"] == booking["id"], read.text

        usage = await http.get("/v1/account", headers=headers)
        # One search counted by the edge, one availability re-check by the hotels service.
        assert usage.json()["usage"]["searchesUsed"] == 2, usage.text

    def confirmed() -> list[Any]:
        return [r for r in stack.receiver.requests if json.loads(r.body).get("type") == "booking.confirmed"]

    await _wait_for(lambda: len(confirmed()) >= 1, 15)
    raw = confirmed()[0]
    verify(raw.body, raw.headers["x-service-signature"], [signing_secret], time.time())
    event = json.loads(raw.body)
    assert (event["account"], event["livemode"]) == (account.id, True)
    assert event["data"]["booking"] == booking["id"]
    jsonschema.validate(event["data"], schema("booking.confirmed"))
    await asyncio.sleep(0.5)  # a second delivery would have been queued by now
    assert len(confirmed()) == 1
    for proc in stack.procs:
        assert secret not in proc.logs()

    # One trace: the edge's request, authsvc's and webhookd's calls, the hotels service and the delivery.
    services = {"edge", "authsvc", "webhookd", "hotels"}

    def spans() -> list[tuple[str, str, str, dict[str, str]]]:
        with stack.collector.lock:
            return [s for s in stack.collector.spans if s[3].get("request.id") == rid]

    await _wait_for(lambda: {s[0] for s in spans()} == services and len(spans()) >= 6, 15)
    names = {(service, name) for service, name, _trace, _attrs in spans()}
    assert {
        ("edge", "edge POST /v1/hotels/bookings"),
        ("hotels", "hotels POST /v1/hotels/bookings"),
        ("authsvc", "travel.auth.v1.AuthService/GetAccount"),
        ("authsvc", "travel.auth.v1.AuthService/ConsumeSearch"),
        ("webhookd", "travel.webhooks.v1.WebhookService/PublishEvent"),
        ("webhookd", "webhookd deliver"),
    } <= names, names
    traces = {trace for _service, _name, trace, _attrs in spans()}
    assert len(traces) == 1, spans()
    assert raw.headers["traceparent"].split("-")[1] == traces.pop()


async def test_identity_headers_without_the_edge_certificate_are_refused(stack: Stack) -> None:
    forged = {"X-Account-Id": "acct_forged", "X-Key-Id": "key_forged", "X-Environment": "live"}
    # No client certificate: the TLS handshake fails, nothing is read.
    plain = ssl.create_default_context(cafile=str(stack.pki / "ca.pem"))
    async with httpx.AsyncClient(verify=plain, timeout=5) as http:
        with pytest.raises(httpx.HTTPError):
            await http.get(f"{stack.hotels_url}/v1/hotels/search", headers=forged)
    # A certificate of the same CA that is not the edge's: refused, 403.
    other = tls_of(stack.pki, "portal").ssl_context(server=False)
    async with httpx.AsyncClient(verify=other, timeout=5) as http:
        refused = await http.post(
            f"{stack.hotels_url}/v1/hotels/bookings",
            headers={**forged, "Idempotency-Key": "forged-1"},
            json={"offer": "off_hotels_1"},
        )
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "forbidden"
    # The edge's own certificate is what it takes (the identity is then believed).
    edge = tls_of(stack.pki, "edge").ssl_context(server=False)
    async with httpx.AsyncClient(verify=edge, timeout=5) as http:
        ok = await http.get(f"{stack.hotels_url}/v1/hotels/search", headers=forged)
    assert ok.status_code == 200, ok.text


async def test_behind_a_tls_terminating_proxy_the_signed_assertion_is_the_identity(stack: Stack) -> None:
    account, created = await partner(
        stack, "Proxied", pb.ACCOUNT_MODE_B, pb.ENVIRONMENT_SANDBOX, ["hotels:read", "hotels:write"]
    )
    headers = {"Host": SANDBOX_HOST, "Authorization": f"Svc {created.secret}", "Idempotency-Key": "sb-1"}
    async with httpx.AsyncClient(base_url=stack.sandbox, timeout=15) as http:
        booked = await http.post("/v1/hotels/bookings", headers=headers, json={"offer": "off_hotels_1"})
    assert booked.status_code == 201, booked.text
    assert (booked.json()["livemode"], booked.json()["state"]) == (False, "confirmed")
    assert booked.json()["payment"].startswith("pay_")  # a mode B account: paid, not held

    # Straight to that upstream (here with a certificate of the CA that is not the edge's, as a proxy's
    # would be): forged headers, an assertion made for another path, and one signed by another key.
    path = "/v1/hotels/bookings"
    forged = {"X-Account-Id": account.id, "X-Environment": "sandbox", "Idempotency-Key": "forged"}
    now = time.time()
    elsewhere = sign(EDGE_KEY, claims_for(account.id, "key_x", "sandbox", "", "req_x", "POST", "/v1/x", now))
    stranger = sign(
        Ed25519PrivateKey.generate(), claims_for(account.id, "", "sandbox", "", "", "POST", path, now)
    )
    mine = sign(
        EDGE_KEY, claims_for(account.id, "key_x", "sandbox", "", "req_x", "GET", "/v1/hotels/search", now)
    )
    proxy = tls_of(stack.pki, "portal").ssl_context(server=False)
    async with httpx.AsyncClient(verify=proxy, base_url=stack.asserted_url, timeout=5) as http:
        for assertion, reason in [
            ("", "missing"),
            (elsewhere, "another request"),
            (stranger, "bad signature"),
        ]:
            refused = await http.post(
                path, headers={**forged, HEADER: assertion}, json={"offer": "off_hotels_1"}
            )
            assert refused.status_code == 403 and reason in refused.json()["error"]["message"], refused.text
        ok = await http.get("/v1/hotels/search", headers={**forged, HEADER: mine})
    assert ok.status_code == 200 and ok.json()["data"][0]["livemode"] is False, ok.text


async def test_the_hotels_services_errors_reach_the_partner_in_the_one_error_shape(stack: Stack) -> None:
    account, created = await partner(
        stack, "Errors", pb.ACCOUNT_MODE_A, pb.ENVIRONMENT_LIVE, ["hotels:read", "hotels:write"]
    )
    headers = {"Host": LIVE_HOST, "Authorization": f"Svc {created.secret}", "Accept": "application/json"}
    async with httpx.AsyncClient(base_url=stack.live, timeout=15) as http:
        missing = await http.get("/v1/hotels/bookings/bk_nope", headers=headers)
        assert missing.status_code == 404, missing.text
        error = missing.json()["error"]
        assert set(error) == {"type", "message", "requestId", "docUrl"}
        assert (error["type"], error["message"]) == ("not_found", "no booking 'bk_nope'")
        assert error["requestId"] == missing.headers["x-request-id"]
        # The docUrl opens on this edge's own docs, at the type's section.
        doc = httpx.URL(error["docUrl"])
        assert (doc.path, doc.fragment) == ("/docs/errors", "not_found")
        page = await http.get(doc.path, headers={"Host": doc.netloc.decode()})
        assert page.status_code == 200 and 'id="not_found"' in page.text
        bad = await http.post(
            "/v1/hotels/bookings", headers={**headers, "Idempotency-Key": "e-1"}, json={"offer": "off_nope"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request", bad.text
        assert bad.json()["error"]["docUrl"].endswith("/docs/errors#invalid_request")

    # The request log files the type, so the portal's look-up says why.
    async with AuthClient(stack.authsvc.grpc_target, tls_of(stack.pki, "svcctl")) as auth:
        deadline = time.monotonic() + 10
        while not (
            found := (
                await auth.list_requests(
                    pb.ListRequestsRequest(account_id=account.id, request_id=error["requestId"])
                )
            ).requests
        ):
            assert time.monotonic() < deadline, "never filed"
            await asyncio.sleep(0.1)
    assert (found[0].status, found[0].error_type) == (404, "not_found")

    # Sanic's own refusals of the hotels service are in the same body (called with the edge's certificate).
    edge = tls_of(stack.pki, "edge").ssl_context(server=False)
    forged = {"X-Account-Id": account.id, "X-Key-Id": created.key.id, "X-Environment": "live"}
    async with httpx.AsyncClient(verify=edge, base_url=stack.hotels_url, timeout=5) as http:
        unknown = await http.get("/v1/hotels/nothing-here", headers=forged)
        wrong = await http.delete("/v1/hotels/search", headers=forged)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found", unknown.text
    assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "method_not_allowed", wrong.text


async def test_a_partners_traceparent_is_continued_to_the_delivery_of_its_booking(stack: Stack) -> None:
    _account, created = await partner(
        stack, "Traced", pb.ACCOUNT_MODE_A, pb.ENVIRONMENT_LIVE, ["hotels:write", "webhooks:write"]
    )
    headers = {"Host": LIVE_HOST, "Authorization": f"Svc {created.secret}"}
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    async with httpx.AsyncClient(base_url=stack.live, timeout=15) as http:
        endpoint = await http.post(
            "/v1/webhooks/endpoints",
            headers={**headers, "Idempotency-Key": "reg-traced"},
            json={"url": stack.receiver.url("/traced"), "events": ["booking.confirmed"]},
        )
        assert endpoint.status_code == 201, endpoint.text
        booked = await http.post(
            "/v1/hotels/bookings",
            headers={
                **headers,
                "Idempotency-Key": "book-traced",
                "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01",
            },
            json={"offer": "off_hotels_3"},
        )
        assert booked.status_code == 201, booked.text
    booking = booked.json()["id"]

    def delivered() -> list[Any]:
        return [
            r for r in stack.receiver.requests if json.loads(r.body).get("data", {}).get("booking") == booking
        ]

    await _wait_for(lambda: len(delivered()) >= 1, 15)
    assert delivered()[0].headers["traceparent"].split("-")[1] == trace_id

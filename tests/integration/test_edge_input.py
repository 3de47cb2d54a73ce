"""Client input through the real edge process, with real authsvc and webhookd processes and a recording
product upstream (issue 8 items 4, 8, 12, 13; issue 9 defects 1 and 5):

- JSON that crashed handlers (5,000-deep nesting, lone surrogates) is 400 invalid_request, and on the
  stream a close with 1007/1008; property tests throw arbitrary JSON and text at every POST route (webhook
  management, /v1/sandbox/events, the product routes through a recording upstream and through the
  built-in sandbox simulator) and at the stream, and never see a 5xx or a 1011;
- product paths with dot segments or encoded slashes are 400 and never reach the upstream;
- the Idempotency-Key reaches webhookd and the upstream, so a re-execution is deduplicated there;
- secret-shaped text in an endpoint description is refused;
- the idempotency fingerprint includes X-Partner-Customer-Ref;
- after a run that issues keys and signing secrets, no database file (nor its -wal/-shm) and no log
  holds any of them.
"""

from __future__ import annotations

import json
import pathlib
import socket
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from edge.testing import SANDBOX_HOST, Upstream, edge_args, write_route_table
from svckit.secretbox import new_key
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="ops@partner.example")
SCOPES = ["account:read", "hotels:read", "hotels:write", "flights:write", "esim:write", "webhooks:read",
          "webhooks:write"]  # fmt: skip
DEEP = '{"url":' + "[" * 5000 + "]" * 5000 + "}"
SURROGATE = '{"url": "http://h/\\ud800", "events": ["booking.confirmed"]}'


@dataclass
class Stack:
    tmp: pathlib.Path
    authsvc: ServiceProcess
    webhookd: ServiceProcess
    edge: ServiceProcess
    # An edge on the default route table: its sandbox routes are the built-in product simulator.
    simulator: ServiceProcess
    upstream: Upstream
    live_upstream: Upstream
    # Every secret this module was issued: none may be found at rest afterwards.
    issued: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['sandbox_port']}"

    def key(self, scopes: list[str] = SCOPES) -> tuple[str, str]:
        """(account id, sandbox key secret) of a new account."""
        with grpc.insecure_channel(self.authsvc.grpc_target) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)
            account = stub.CreateAccount(
                pb.CreateAccountRequest(name="Partner", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
            ).account
            created = stub.CreateKey(
                pb.CreateKeyRequest(
                    account_id=account.id,
                    environment=pb.ENVIRONMENT_SANDBOX,
                    name="input",
                    scopes=scopes,
                    actor=ACTOR,
                )
            )
        self.issued.append(created.secret)
        return account.id, created.secret


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("edge_input")
    upstream, live_upstream = Upstream("sandbox"), Upstream("live")
    routes = write_route_table(tmp / "routes.json", live_upstream, upstream)
    (tmp / "webhookd.key").write_text(new_key())
    (tmp / "edge.key").write_text(new_key())
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "authsvc.db"))
        procs.append(auth)
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "webhookd.db"), "--allow-private-targets", "--allow-http",
            "--secrets-key-file", str(tmp / "webhookd.key"),
        )  # fmt: skip
        procs.append(wh)
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge.db"), routes,
                "--idempotency-key-file", str(tmp / "edge.key"),
                "--rate-limit-sandbox", "0",
                # the stream properties open one stream per example, far past an account's open rate
                "--stream-opens-per-second", "1000", "--stream-open-burst", "1000",
            ),
        ).start(tmp / "edge.log")  # fmt: skip
        procs.append(edge)
        sim = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge-sim.db"), None,
                "--idempotency-key-file", str(tmp / "edge.key"), "--rate-limit-sandbox", "0",
            ),
        ).start(tmp / "edge-sim.log")  # fmt: skip
        procs.append(sim)
        yield Stack(tmp, auth, wh, edge, sim, upstream, live_upstream)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        upstream.close()
        live_upstream.close()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    # Generous: on a loaded machine webhookd may wait for its SQLite write lock (busy timeout 30 s).
    with httpx.Client(timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def partner(stack: Stack) -> tuple[str, str]:
    return stack.key()


@pytest.fixture(scope="module")
def endpoint_id(stack: Stack, http: httpx.Client, partner: tuple[str, str]) -> str:
    resp = http.post(
        stack.base + "/v1/webhooks/endpoints",
        headers=post_headers(partner[1]),
        json={"url": "http://127.0.0.1:9/hook", "events": ["booking.confirmed"]},
    )
    assert resp.status_code == 201, resp.text
    stack.issued.append(resp.json()["secret"])
    return str(resp.json()["id"])


def post_headers(secret: str, idem: str | None = None, **extra: str) -> dict[str, str]:
    return {
        "Host": SANDBOX_HOST,
        "Authorization": f"Svc {secret}",
        "Content-Type": "application/json",
        "Idempotency-Key": idem or uuid.uuid4().hex,
        **extra,
    }


def assert_error(resp: httpx.Response, status: int, etype: str) -> str:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["type"] == etype, error
    return str(error["message"])


# -- issue 8 item 4: JSON that crashed handlers --------------------------------------------------------------
def post_routes(endpoint_id: str) -> list[str]:
    """Every POST route: webhook management and the product route table's."""
    ep = f"/v1/webhooks/endpoints/{endpoint_id}"
    return [
        "/v1/webhooks/endpoints",
        ep,
        ep + "/rotate_secret",
        ep + "/enable",
        ep + "/recover",
        ep + "/test",
        "/v1/webhooks/attempts/att_unknown/resend",
        "/v1/sandbox/events",
        "/v1/sandbox/clock/advance",
        "/v1/hotels/bookings",
    ]


# The built-in simulator's POST routes (the default route table's sandbox side); a well-formed id it
# does not know reads as a confirmed booking.
SIMULATOR_POSTS = [
    "/v1/hotels/bookings",
    "/v1/hotels/bookings/bk_test_0123456789ab/modify",
    "/v1/hotels/bookings/bk_test_0123456789ab/cancel",
    "/v1/flights/bookings",
    "/v1/flights/bookings/bk_test_0123456789ab/cancel",
    "/v1/esim/orders",
]


@pytest.mark.parametrize("body", [DEEP, SURROGATE], ids=["5000-deep", "lone-surrogate"])
def test_reported_bodies_are_400_on_every_post_route(
    stack: Stack, http: httpx.Client, partner: tuple[str, str], endpoint_id: str, body: str
) -> None:
    before = len(stack.upstream.requests)
    for path in post_routes(endpoint_id):
        headers = post_headers(partner[1], **{"X-Partner-Customer-Ref": "cust-1"})
        resp = http.post(stack.base + path, headers=headers, content=body.encode())
        message = assert_error(resp, 400, "invalid_request")
        assert "nested deeper" in message or "surrogate" in message, (path, message)
    assert len(stack.upstream.requests) == before


def _json(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=12,
    )


# Text with what broke things before: lone surrogates, control characters, NUL, secrets' shapes.
TEXT = st.text(
    st.characters(codec=None, exclude_categories=()) | st.sampled_from(["\ud800", "\udfff", "\x00", "\\"]),
    max_size=40,
) | st.sampled_from(["svc_test_" + "a" * 40, "whsec_" + "A" * 44, "http://127.0.0.1:9/x", "booking.*"])
FIELDS = ["url", "events", "description", "overlapSeconds", "since", "offer"]
BODIES = (
    _json(TEXT).map(lambda v: json.dumps(v))  # any JSON, lone surrogates escaped as \ud800
    | st.dictionaries(st.sampled_from(FIELDS), _json(TEXT), max_size=4).map(json.dumps)
    | st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)
    | TEXT.map(lambda t: t.encode("utf-8", "surrogatepass").decode("latin-1"))  # not JSON, maybe not UTF-8
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(route=st.integers(0, 8), body=BODIES, ref=st.sampled_from(["cust-1", "a b", "x" * 70, ""]))
def test_property_no_post_route_answers_5xx(
    stack: Stack,
    http: httpx.Client,
    partner: tuple[str, str],
    endpoint_id: str,
    route: int,
    body: str,
    ref: str,
) -> None:
    path = post_routes(endpoint_id)[route]
    headers = post_headers(partner[1], **{"X-Partner-Customer-Ref": ref})
    resp = http.post(stack.base + path, headers=headers, content=body.encode("latin-1", "replace"))
    assert resp.status_code < 500 or (path == "/v1/hotels/bookings" and resp.status_code == 503), (
        path, body[:200], resp.text,
    )  # fmt: skip
    assert set(resp.json()) == {"error"} or resp.status_code < 300
    if resp.status_code in (200, 201) and "secret" in resp.text:
        stack.issued.append(resp.json()["secret"])


SIM_FIELDS = ["offer", "plan", "changes", "reason", "traveller", "amount"]
SIM_BODIES = BODIES | st.dictionaries(
    st.sampled_from(SIM_FIELDS), _json(TEXT) | st.sampled_from(["off_hotels_1", "plan_eu_5gb"]), max_size=3
).map(json.dumps)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from(SIMULATOR_POSTS), body=SIM_BODIES, ref=st.sampled_from(["cust-1", "a b", ""]))
def test_property_no_simulator_route_answers_5xx(
    stack: Stack, http: httpx.Client, partner: tuple[str, str], route: str, body: str, ref: str
) -> None:
    headers = post_headers(partner[1], **{"X-Partner-Customer-Ref": ref})
    base = f"http://127.0.0.1:{stack.simulator.ports['sandbox_port']}"
    resp = http.post(base + route, headers=headers, content=body.encode("latin-1", "replace"))
    assert resp.status_code < 500, (route, body[:200], resp.text)


def stream(stack: Stack, secret: str) -> Any:
    # The URI carries the Host the edge maps to the sandbox; the socket says where to really connect.
    sock = socket.create_connection(("127.0.0.1", stack.edge.ports["sandbox_port"]), timeout=30)
    return connect(
        f"ws://{SANDBOX_HOST}/v1/stream",
        sock=sock,
        subprotocols=["svc", secret],  # type: ignore[list-item]
        open_timeout=30,
    )


def answer(conn: Any) -> dict[str, Any] | int:
    """The next frame that is not a ping, or the close code."""
    try:
        while True:
            msg = json.loads(conn.recv(timeout=30))
            if msg["type"] != "ping":
                return msg  # type: ignore[no-any-return]
    except websockets.ConnectionClosed as closed:
        assert closed.rcvd is not None
        return closed.rcvd.code


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ('{"type": "subscribe", "events":' + "[" * 5000 + "]" * 5000 + "}", 1008),
        ('{"type": "subscribe", "events": ["\\ud800"]}', 1007),
        (b'{"type": "ping", "x": "\xff"}', 1007),  # a binary frame that is not UTF-8
    ],
    ids=["5000-deep", "lone-surrogate", "binary-not-utf8"],
)
def test_reported_frames_close_the_stream_with_1007_or_1008(
    stack: Stack, partner: tuple[str, str], frame: str | bytes, code: int
) -> None:
    with stream(stack, partner[1]) as conn:
        conn.send(frame)
        assert answer(conn) == code


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    frame=BODIES
    | st.fixed_dictionaries({"type": st.just("subscribe"), "events": _json(TEXT), "since": _json(TEXT)}).map(
        json.dumps
    )
)
def test_property_the_stream_never_fails_on_client_frames(
    stack: Stack, partner: tuple[str, str], frame: str
) -> None:
    with stream(stack, partner[1]) as conn:
        conn.send(frame)
        got = answer(conn)
        if isinstance(got, int):
            assert got in (1007, 1008), (frame[:200], got)
        else:
            assert got["type"] in ("error", "pong", "subscribed"), got
            conn.send(json.dumps({"type": "ping"}))  # still serving
            while (got := answer(conn)) != {"type": "pong"}:
                assert isinstance(got, dict) and got["type"] in ("error", "event"), (frame[:200], got)


# -- issue 8 item 8: product paths -------------------------------------------------------------------------
def raw_get(stack: Stack, path: str, secret: str) -> tuple[int, dict[str, Any]]:
    """GET with the request target exactly as given (HTTP clients remove dot segments themselves)."""
    with socket.create_connection(("127.0.0.1", stack.edge.ports["sandbox_port"]), timeout=30) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {SANDBOX_HOST}\r\nAuthorization: Svc {secret}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += sock.recv(65536)
    return int(head.split(b" ", 2)[1]), json.loads(body)


@pytest.mark.parametrize(
    "path",
    ["/v1/hotels/bookings/..", "/v1/hotels/bookings/%2e%2e", "/v1/hotels/bookings/.",
     "/v1/hotels/bookings/..;x", "/v1/hotels/bookings/a%2fb", "/v1/hotels/bookings/a%5Cb",
     "/v1/hotels/x/../bookings/bk_1"],
)  # fmt: skip
def test_dot_segments_and_encoded_slashes_never_reach_the_upstream(
    stack: Stack, partner: tuple[str, str], path: str
) -> None:
    before = len(stack.upstream.requests)
    status, body = raw_get(stack, path, partner[1])
    assert status == 400 and body["error"]["type"] == "invalid_request", body
    assert len(stack.upstream.requests) == before


def test_a_clean_path_reaches_the_upstream_as_matched(stack: Stack, partner: tuple[str, str]) -> None:
    path = "/v1/hotels/bookings/bk.1%41"
    status, body = raw_get(stack, path, partner[1])
    assert status == 200, body
    assert stack.upstream.requests[-1].path == body["path"] == path


# -- issue 8 items 12 and 13: the Idempotency-Key passed down; secrets in free text --------------------------
def test_the_idempotency_key_reaches_the_product_upstream(
    stack: Stack, http: httpx.Client, partner: tuple[str, str]
) -> None:
    headers = post_headers(partner[1], "book-upstream-1", **{"X-Partner-Customer-Ref": "cust-1"})
    assert http.post(stack.base + "/v1/hotels/bookings", headers=headers, json={}).status_code == 200
    sent = stack.upstream.requests[-1]
    assert sent.headers["idempotency-key"] == "book-upstream-1"
    assert sent.headers["x-account-id"] == partner[0] and sent.headers["x-environment"] == "sandbox"


def forget_stored_response(stack: Stack, account_id: str, key: str) -> None:
    """What an edge crash between webhookd's answer and storing the response leaves: no stored answer."""
    with sqlite3.connect(stack.tmp / "edge.db") as db:
        assert (
            db.execute(
                "DELETE FROM edge_idempotency WHERE account_id = ? AND idem_key = ?", (account_id, key)
            ).rowcount
            == 1
        )


def list_endpoints(stack: Stack, http: httpx.Client, secret: str) -> list[dict[str, Any]]:
    resp = http.get(
        stack.base + "/v1/webhooks/endpoints",
        headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"},
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def test_a_registration_run_again_after_a_lost_response_yields_one_endpoint(
    stack: Stack, http: httpx.Client
) -> None:
    account_id, secret = stack.key()
    body = {"url": "http://127.0.0.1:9/once", "events": ["booking.confirmed"]}
    first = http.post(stack.base + "/v1/webhooks/endpoints", headers=post_headers(secret, "reg-1"), json=body)
    assert first.status_code == 201, first.text
    stack.issued.append(first.json()["secret"])
    forget_stored_response(stack, account_id, "reg-1")
    again = http.post(stack.base + "/v1/webhooks/endpoints", headers=post_headers(secret, "reg-1"), json=body)
    assert again.status_code == 201 and "idempotent-replayed" not in again.headers  # it ran again...
    assert again.json()["id"] == first.json()["id"]  # ...and webhookd answered with the first endpoint
    assert again.json()["secret"] == first.json()["secret"]
    assert [e["id"] for e in list_endpoints(stack, http, secret)] == [first.json()["id"]]


def test_secret_shaped_descriptions_are_refused(stack: Stack, http: httpx.Client) -> None:
    _, secret = stack.key()
    for pasted in (secret, "whsec_" + "QUJD" * 11):
        resp = http.post(
            stack.base + "/v1/webhooks/endpoints",
            headers=post_headers(secret),
            json={
                "url": "http://127.0.0.1:9/d",
                "events": ["booking.confirmed"],
                "description": f"key {pasted}",
            },
        )
        message = assert_error(resp, 400, "invalid_request")
        assert "description" in message and pasted not in message
    assert list_endpoints(stack, http, secret) == []


# -- issue 9 defect 5: the customer reference is part of the fingerprint -------------------------------------
def test_the_same_key_and_body_for_another_traveller_is_422(
    stack: Stack, http: httpx.Client, partner: tuple[str, str]
) -> None:
    url = stack.base + "/v1/hotels/bookings"
    first = http.post(
        url,
        headers=post_headers(partner[1], "trv-1", **{"X-Partner-Customer-Ref": "cust-1"}),
        json={"offer": 1},
    )
    assert first.status_code == 200
    n = len(stack.upstream.requests)
    replay = http.post(
        url,
        headers=post_headers(partner[1], "trv-1", **{"X-Partner-Customer-Ref": "cust-1"}),
        json={"offer": 1},
    )
    assert replay.headers["idempotent-replayed"] == "true" and replay.content == first.content
    other = http.post(
        url,
        headers=post_headers(partner[1], "trv-1", **{"X-Partner-Customer-Ref": "cust-2"}),
        json={"offer": 1},
    )
    assert "X-Partner-Customer-Ref" in assert_error(other, 422, "idempotency_key_reused")
    assert len(stack.upstream.requests) == n  # neither reached the product


# -- issue 9 defect 1: no secret at rest ---------------------------------------------------------------------
def test_no_issued_secret_is_found_in_any_database_file_or_log(stack: Stack, http: httpx.Client) -> None:
    _, secret = stack.key()
    register = (
        stack.base + "/v1/webhooks/endpoints",
        {"url": "http://127.0.0.1:9/r", "events": ["booking.confirmed"]},
    )
    created = http.post(register[0], headers=post_headers(secret, "rest-1"), json=register[1])
    assert created.status_code == 201, created.text
    rotate = (
        stack.base + f"/v1/webhooks/endpoints/{created.json()['id']}/rotate_secret",
        {"overlapSeconds": 60},
    )
    rotated = http.post(rotate[0], headers=post_headers(secret, "rest-2"), json=rotate[1])
    assert rotated.status_code == 200, rotated.text
    stack.issued += [created.json()["secret"], rotated.json()["secret"]]
    # A retry within 24 h still gets the usable answer, from the sealed record.
    for first, idem, (url, payload) in ((created, "rest-1", register), (rotated, "rest-2", rotate)):
        again = http.post(url, headers=post_headers(secret, idem), json=payload)
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["secret"] == first.json()["secret"]
    files = [p for p in stack.tmp.iterdir() if p.is_file() and not p.name.endswith((".json", ".key"))]
    assert {"edge.db", "edge.db-wal", "webhookd.db", "webhookd.db-wal", "authsvc.db"} <= {
        p.name for p in files
    }
    for path in files:
        data = path.read_bytes()
        for issued in stack.issued:
            assert issued.encode() not in data, f"a secret ({issued[:10]}...) is readable in {path.name}"

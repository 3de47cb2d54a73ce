"""Destination types through the real edge, authsvc and webhookd processes (docs/webhooks.md
"Destinations"): amqp, nats and polling endpoints registered, shown and updated over HTTP; a broker
password is write-only (never in a response, sealed at rest, in no log); every bad body is a 400 naming
its field and creates or changes nothing."""

from __future__ import annotations

import pathlib
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest

from edge.testing import SANDBOX_HOST, Upstream, edge_args, write_route_table
from svckit.secretbox import new_key
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="ops@partner.example")
PASSWORD = "amqp-pw-" + uuid.uuid4().hex
TOKEN = "nats-token-" + uuid.uuid4().hex
EVENTS = ["booking.confirmed"]
AMQP = {"url": "amqp://partner@127.0.0.1:5672/bookings", "exchange": "partner.events", "routingKey": "bk"}
NATS = {"servers": ["nats://127.0.0.1:4222"], "subject": "partner.bookings"}


@dataclass
class Stack:
    tmp: pathlib.Path
    authsvc: ServiceProcess
    webhookd: ServiceProcess
    edge: ServiceProcess

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['sandbox_port']}"

    def key(self) -> str:
        with grpc.insecure_channel(self.authsvc.grpc_target) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)
            account = stub.CreateAccount(
                pb.CreateAccountRequest(name="Partner", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
            ).account
            return str(
                stub.CreateKey(
                    pb.CreateKeyRequest(
                        account_id=account.id,
                        environment=pb.ENVIRONMENT_SANDBOX,
                        name="dest",
                        scopes=["webhooks:read", "webhooks:write"],
                        actor=ACTOR,
                    )
                ).secret
            )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("edge_dest")
    up, live = Upstream("sandbox"), Upstream("live")
    routes = write_route_table(tmp / "routes.json", live, up)
    (tmp / "webhookd.key").write_text(new_key())
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "authsvc.db"))
        procs.append(auth)
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "webhookd.db"), "--allow-private-targets",
            "--secrets-key-file", str(tmp / "webhookd.key"),
        )  # fmt: skip
        procs.append(wh)
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target,
                wh.grpc_target,
                sqlite_url(tmp, "edge.db"),
                routes,
                "--rate-limit-sandbox",
                "0",
            ),
        ).start(tmp / "edge.log")
        procs.append(edge)
        yield Stack(tmp, auth, wh, edge)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        up.close()
        live.close()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:
        yield client


def _headers(secret: str) -> dict[str, str]:
    return {
        "Host": SANDBOX_HOST,
        "Authorization": f"Svc {secret}",
        "Content-Type": "application/json",
        "Idempotency-Key": uuid.uuid4().hex,
    }


def _post(
    stack: Stack, http: httpx.Client, secret: str, body: dict[str, Any], path: str = ""
) -> httpx.Response:
    return http.post(f"{stack.base}/v1/webhooks/endpoints{path}", headers=_headers(secret), json=body)


def _list(stack: Stack, http: httpx.Client, secret: str) -> list[dict[str, Any]]:
    resp = http.get(f"{stack.base}/v1/webhooks/endpoints", headers=_headers(secret))
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def test_broker_endpoints_are_registered_shown_and_updated_without_their_passwords(
    stack: Stack, http: httpx.Client
) -> None:
    secret = stack.key()
    made = _post(
        stack, http, secret, {"type": "amqp", "amqp": {**AMQP, "password": PASSWORD}, "events": EVENTS}
    )
    assert made.status_code == 201, made.text
    ep = made.json()
    assert ep["type"] == "amqp" and ep["url"] is None and ep["nats"] is None
    assert ep["amqp"] == {
        "url": "amqp://partner@127.0.0.1:5672/bookings",
        "exchange": "partner.events",
        "routingKey": "bk",
        "passwordSet": True,
    }
    # A new routing key, the password left out: kept.
    moved = _post(
        stack, http, secret, {"type": "amqp", "amqp": {**AMQP, "routingKey": "bk2"}}, f"/{ep['id']}"
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["amqp"]["routingKey"] == "bk2" and moved.json()["amqp"]["passwordSet"] is True
    nats = _post(stack, http, secret, {"type": "nats", "nats": {**NATS, "token": TOKEN}, "events": EVENTS})
    assert nats.status_code == 201, nats.text
    assert nats.json()["nats"] == {**NATS, "user": "", "credentialsSet": True}
    polling = _post(stack, http, secret, {"type": "polling", "events": EVENTS})
    assert polling.status_code == 201, polling.text
    assert polling.json()["type"] == "polling" and polling.json()["url"] is None
    # A url alone makes an endpoint an http one again; its broker settings go.
    back = _post(stack, http, secret, {"url": "https://127.0.0.1:9/hook"}, f"/{ep['id']}")
    assert back.status_code == 200, back.text
    assert back.json()["type"] == "http" and back.json()["amqp"] is None
    listed = {e["id"]: e for e in _list(stack, http, secret)}
    assert listed[nats.json()["id"]]["type"] == "nats" and listed[polling.json()["id"]]["type"] == "polling"
    for text in (made.text, moved.text, nats.text, back.text, str(listed)):
        assert PASSWORD not in text and TOKEN not in text
    # At rest: sealed under the key (enc2:), never in the clear in a database file or a log.
    db = stack.tmp / "webhookd.db"
    stored = (
        sqlite3.connect(db)
        .execute("SELECT destination_secret FROM wh_endpoints WHERE destination_secret != ''")
        .fetchall()
    )
    assert stored and all(v.startswith("enc2:") for (v,) in stored)
    for path in stack.tmp.iterdir():
        if path.is_file():
            content = path.read_bytes()
            assert PASSWORD.encode() not in content and TOKEN.encode() not in content, path


BAD: list[tuple[dict[str, Any], str]] = [
    ({"type": "kafka", "events": EVENTS}, "type"),
    ({"type": "amqp", "events": EVENTS}, "amqp"),
    ({"type": "nats", "events": EVENTS}, "nats"),
    ({"url": "https://127.0.0.1:9/h", "amqp": AMQP, "events": EVENTS}, "amqp"),
    ({"type": "polling", "url": "https://127.0.0.1:9/h", "events": EVENTS}, "url"),
    ({"type": "amqp", "amqp": {**AMQP, "url": "amqp://partner:pw@127.0.0.1/"}, "events": EVENTS}, "amqp.url"),
    ({"type": "amqp", "amqp": {**AMQP, "url": "http://127.0.0.1/"}, "events": EVENTS}, "amqp.url"),
    ({"type": "amqp", "amqp": {**AMQP, "url": "amqp://127.0.0.1:99999/"}, "events": EVENTS}, "amqp.url"),
    ({"type": "amqp", "amqp": {**AMQP, "url": "amqp://169.254.169.254/"}, "events": EVENTS}, "amqp.url"),
    ({"type": "amqp", "amqp": {**AMQP, "exchange": "a b"}, "events": EVENTS}, "amqp.exchange"),
    ({"type": "amqp", "amqp": {**AMQP, "vhost": "x"}, "events": EVENTS}, "amqp"),
    ({"type": "amqp", "amqp": "amqp://127.0.0.1/", "events": EVENTS}, "amqp"),
    ({"type": "amqp", "amqp": {**AMQP, "password": None}, "events": EVENTS}, "amqp.password"),
    ({"type": "nats", "nats": {**NATS, "user": None}, "events": EVENTS}, "nats.user"),
    ({"type": "nats", "nats": NATS, "signatureScheme": None, "events": EVENTS}, "signatureScheme"),
    ({"url": "https://127.0.0.1:9/h", "description": None, "events": EVENTS}, "description"),
    ({"type": "nats", "nats": {**NATS, "servers": []}, "events": EVENTS}, "nats.servers"),
    (
        {"type": "nats", "nats": {**NATS, "servers": ["nats://u:p@127.0.0.1:4222"]}, "events": EVENTS},
        "nats.servers",
    ),
    ({"type": "nats", "nats": {**NATS, "subject": "partner.*"}, "events": EVENTS}, "nats.subject"),
    (
        {"type": "nats", "nats": {**NATS, "subject": "$JS.API.STREAM.DELETE.X"}, "events": EVENTS},
        "nats.subject",
    ),
    ({"type": "nats", "nats": {**NATS, "subject": "a..b"}, "events": EVENTS}, "nats.subject"),
    ({"type": "nats", "nats": {**NATS, "user": "u", "token": "t"}, "events": EVENTS}, "nats.token"),
    (
        {"type": "nats", "nats": {**NATS, "servers": ["nats://10.0.0.1:4222"] * 9}, "events": EVENTS},
        "nats.servers",
    ),
]


@pytest.mark.parametrize(("body", "field"), BAD, ids=[f"{i}-{f}" for i, (_b, f) in enumerate(BAD)])
def test_bad_destinations_are_400_naming_the_field_and_change_nothing(
    stack: Stack, http: httpx.Client, body: dict[str, Any], field: str
) -> None:
    secret = stack.key()
    resp = _post(stack, http, secret, body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request"
    assert field in error["message"], error
    assert _list(stack, http, secret) == []
    # The same settings on an update of an existing http endpoint: refused, the endpoint unchanged.
    made = _post(stack, http, secret, {"url": "https://127.0.0.1:9/hook", "events": EVENTS})
    assert made.status_code == 201, made.text
    update = {k: v for k, v in body.items() if k != "events"}
    resp = _post(stack, http, secret, update, f"/{made.json()['id']}")
    assert resp.status_code == 400, resp.text
    shown = made.json()
    del shown["secret"]
    assert _list(stack, http, secret) == [shown]


def test_the_nullable_fields_null_mean_none(stack: Stack, http: httpx.Client) -> None:
    """``filter`` and ``receiverAuth`` are nullable in the OpenAPI schema: null is "none" on a create
    (schemathesis sent exactly this), and the other fields' null stays a 400 (the table above)."""
    secret = stack.key()
    body = {"url": "https://127.0.0.1:9/h", "events": EVENTS, "filter": None, "receiverAuth": None}
    resp = _post(stack, http, secret, body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["filter"] is None and resp.json()["receiverAuth"] is None

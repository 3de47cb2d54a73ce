"""A webhook endpoint's receiverAuth over the edge's HTTP API (real authsvc, webhookd and edge processes):
set on creation, shown back without its secrets, kept or replaced on update, removed with null; a header
of ours, a credential header, an unknown field or a wrong type is 400 naming it and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import grpc
import httpx
import pytest
import trustme

from tests.integration.edge_stack import assert_error, hdrs, new_key
from tests.integration.test_edge_stream_webhooks import Stack, running_stack
from travel.auth.v1 import auth_pb2_grpc

SECRET = "cs_edge-" + "Q9" * 10


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(
        tmp_path_factory.mktemp("edge_rxauth"), ["--allow-private-targets", "--allow-http"], []
    ) as up:
        yield up


@pytest.fixture
async def auth(stack: Stack) -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    async with grpc.aio.insecure_channel(stack.authsvc.grpc_target) as channel:
        yield auth_pb2_grpc.AuthServiceStub(channel)


async def test_receiver_auth_over_http(stack: Stack, auth: auth_pb2_grpc.AuthServiceStub) -> None:
    _, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    base = stack.sandbox + "/v1/webhooks/endpoints"
    h = hdrs(key.secret, Content_Type="application/json")
    leaf = trustme.CA().issue_cert("partner.example")
    private_key = leaf.private_key_pem.bytes().decode()
    receiver_auth = {
        "clientCertificate": {
            "certificate": leaf.cert_chain_pems[0].bytes().decode(),
            "privateKey": private_key,
        },
        "oauth2": {
            "tokenUrl": "https://localhost:9/token",
            "clientId": "cid",
            "clientSecret": SECRET,
            "scope": "s",
        },
        "headers": {"X-Tenant": "t1"},
    }
    body = {
        "url": stack.receiver.url + "/hook",
        "events": ["booking.confirmed"],
        "receiverAuth": receiver_auth,
    }
    async with httpx.AsyncClient(timeout=10) as http:
        refusals = [
            ({"headers": {"webhook-signature": "x"}}, "webhook-signature"),
            ({"headers": {"Authorization": "Bearer x"}}, "Authorization"),
            ({"headers": {"X-A": 1}}, "receiverAuth.headers"),
            (
                {"oauth2": {"tokenUrl": "https://169.254.169.254/t", "clientId": "c", "clientSecret": "s"}},
                "metadata",
            ),
            ({"oauth2": {"clientId": "c"}}, "receiverAuth.oauth2.tokenUrl"),
            ({"clientCertificate": {"issuedByPlatform": True}}, "issues no client certificates"),
            ({"clientCertificate": {"certificate": "x", "privateKey": "y"}}, "not a PEM certificate"),
            ({"clientCertificate": {"sha256": "AB"}}, "receiverAuth.clientCertificate.sha256"),
            (
                {"clientCertificate": {"certificate": "x", "privateKey": "y"}},
                "receiverAuth.clientCertificate.certificate:",
            ),
            ({"mtls": {}}, "mtls"),
            ([], "receiverAuth"),
        ]
        for n, (bad, named) in enumerate(refusals):
            r = await http.post(
                base, headers={**h, "Idempotency-Key": f"bad{n}"}, json={**body, "receiverAuth": bad}
            )
            assert named in assert_error(r, 400, "invalid_request")["message"], (bad, r.text)
        # Only an http endpoint has a receiver to authenticate to.
        bad_free = {"headers": {"X-A": "1"}}
        polling = {
            "type": "polling",
            "events": ["booking.confirmed"],
            "receiverAuth": {"headers": {"X-A": "1"}},
        }
        r = await http.post(base, headers={**h, "Idempotency-Key": "polling"}, json=polling)
        assert "only http endpoints" in assert_error(r, 400, "invalid_request")["message"]
        assert (await http.get(base, headers=hdrs(key.secret))).json()["data"] == []  # nothing was made
        # An empty one is none (what the OpenAPI document allows a polling or broker endpoint).
        empty = {**polling, "receiverAuth": {"headers": {}, "oauth2": None}}
        r = await http.post(base, headers={**h, "Idempotency-Key": "polling-empty"}, json=empty)
        assert r.status_code == 201 and r.json()["receiverAuth"] is None, r.text
        # An update giving that polling endpoint one: a valid body, an endpoint it does not fit (409).
        pid = r.json()["id"]
        r = await http.post(
            f"{base}/{pid}", headers={**h, "Idempotency-Key": "polling-upd"}, json={"receiverAuth": bad_free}
        )
        err = assert_error(r, 409, "conflict")
        assert f"{pid} is a polling endpoint and only http endpoints have one" in err["message"]
        assert (await http.get(f"{base}/{pid}", headers=hdrs(key.secret))).json()["receiverAuth"] is None
        assert (await http.delete(f"{base}/{pid}", headers=hdrs(key.secret))).status_code == 200

        made = await http.post(base, headers={**h, "Idempotency-Key": "ok"}, json=body)
        assert made.status_code == 201, made.text
        shown = made.json()["receiverAuth"]
        assert shown["oauth2"] == {
            "tokenUrl": "https://localhost:9/token",
            "clientId": "cid",
            "scope": "s",
            "audience": "",
        }
        assert shown["headers"] == {"X-Tenant": "t1"}
        cert = shown["clientCertificate"]
        assert (
            cert["issuedByPlatform"] is False
            and cert["subject"].startswith("OU=Testing cert")
            and len(cert["sha256"]) == 64
        )
        assert SECRET not in made.text and "PRIVATE KEY" not in made.text
        ep = made.json()["id"]

        # The fingerprint alone and no secret: both kept; the headers replaced.
        kept = {
            "clientCertificate": {"sha256": cert["sha256"]},
            "oauth2": {"tokenUrl": "https://localhost:9/token", "clientId": "cid"},
            "headers": {"X-Tenant": "t2"},
        }
        r = await http.post(
            f"{base}/{ep}", headers={**h, "Idempotency-Key": "u1"}, json={"receiverAuth": kept}
        )
        assert r.status_code == 200, r.text
        assert r.json()["receiverAuth"]["clientCertificate"]["sha256"] == cert["sha256"]
        assert r.json()["receiverAuth"]["headers"] == {"X-Tenant": "t2"}
        got = await http.get(f"{base}/{ep}", headers=hdrs(key.secret))
        assert got.json()["receiverAuth"] == r.json()["receiverAuth"]
        assert SECRET not in json.dumps(got.json()) and "PRIVATE KEY" not in got.text

        r = await http.post(
            f"{base}/{ep}", headers={**h, "Idempotency-Key": "u2"}, json={"receiverAuth": None}
        )
        assert r.status_code == 200 and r.json()["receiverAuth"] is None

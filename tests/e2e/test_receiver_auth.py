"""Receivers that authenticate us, against a real webhookd process: an HTTPS receiver that requires a
client certificate of the platform's CA gets its deliveries (a certificate of another CA fails the
attempt); a receiver that requires an OAuth2 bearer token from the test's own token endpoint gets its
deliveries, the token fetched once for many and refreshed after a 401; custom headers arrive and cannot
override ours; every delivery goes through the operator's egress proxy when one is set; and no secret (a
private key, a client secret, a token) is in the log, the attempt log, the answers or the database file
outside its sealed column."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import sqlite3
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import grpc
import pytest
import trustme
from google.protobuf import field_mask_pb2

from tests.support import ServiceProcess, event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd._secretbox import new_key
from webhookd.testing import ConnectProxy, Received, Receiver

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_rxauth"
CLIENT_ID = "webhooks-client"
CLIENT_SECRET = "cs_" + "Zq7" * 12  # the OAuth2 client secret: never in a log, an answer or the file


@dataclass
class Pki:
    server_ca: trustme.CA
    client_ca: trustme.CA  # the platform's CA for accounts' client certificates (webhookd's flags)
    ca_bundle: str
    client_ca_cert: str
    client_ca_key: str

    def server_context(self, *, require_client_of: trustme.CA | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server_ca.issue_cert("127.0.0.1").configure_cert(ctx)
        if require_client_of is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cadata=require_client_of.cert_pem.bytes().decode())
        return ctx


@pytest.fixture
def pki(tmp_path: pathlib.Path) -> Pki:
    server_ca, client_ca = trustme.CA(), trustme.CA()
    server_ca.cert_pem.write_to_path(str(tmp_path / "server-ca.pem"))
    client_ca.cert_pem.write_to_path(str(tmp_path / "client-ca.pem"))
    client_ca.private_key_pem.write_to_path(str(tmp_path / "client-ca.key"))
    return Pki(
        server_ca,
        client_ca,
        str(tmp_path / "server-ca.pem"),
        str(tmp_path / "client-ca.pem"),
        str(tmp_path / "client-ca.key"),
    )


@pytest.fixture
def mtls_receiver(pki: Pki) -> Iterator[Receiver]:
    r = Receiver(pki.server_context(require_client_of=pki.client_ca)).start()
    yield r
    r.stop()


@dataclass
class TokenServer:
    """The receiver's own OAuth2 token endpoint (client credentials, HTTP Basic)."""

    issued: list[str] = field(default_factory=list)
    refused: int = 0
    port: int = 0

    def answer(self, head: bytes, body: bytes) -> tuple[int, dict[str, object]]:
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        form = dict(p.split("=", 1) for p in body.decode().split("&"))
        if headers.get("authorization") != expected or form.get("grant_type") != "client_credentials":
            self.refused += 1
            return 401, {"error": "invalid_client"}
        token = f"tok-{len(self.issued) + 1}-" + "x" * 20
        self.issued.append(token)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                status, answer = self.answer(head, body)
                out = json.dumps(answer).encode()
                answer_head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                writer.write(f"{answer_head}Content-Length: {len(out)}\r\n\r\n".encode() + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, StopIteration):
            writer.close()


@pytest.fixture
async def token_server(pki: Pki) -> AsyncIterator[TokenServer]:
    ts = TokenServer()
    server = await asyncio.start_server(ts.handle, "127.0.0.1", 0, ssl=pki.server_context())
    ts.port = server.sockets[0].getsockname()[1]
    yield ts
    server.close()


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    p = ConnectProxy()
    server = await asyncio.start_server(p.handle, "127.0.0.1", 0)
    p.port = server.sockets[0].getsockname()[1]
    yield p
    server.close()


def _webhookd(tmp_path: pathlib.Path, pki: Pki, key: str, *extra: str) -> ServiceProcess:
    return ServiceProcess(
        "webhookd",
        [
            "--listen", "127.0.0.1:0", "--metrics-listen", "",
            "--database", f"sqlite+aiosqlite:///{tmp_path / 'wh.db'}",
            "--allow-private-targets", "--ca-bundle", pki.ca_bundle,
            "--client-ca-cert", pki.client_ca_cert, "--client-ca-key", pki.client_ca_key,
            "--delivery-timeout", "5", "--lease-seconds", "10", "--log-level", "DEBUG",
            *extra,
        ],
        env={"WEBHOOKD_SECRETS_KEY": key},
    )  # fmt: skip


async def _publish(stub: webhooks_pb2_grpc.WebhookServiceStub, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        data = event_data("booking.confirmed")
        resp = await stub.PublishEvent(
            pb.PublishEventRequest(
                account_id=ACCT, environment=LIVE, type="booking.confirmed", state="confirmed", data=data
            )
        )
        ids.append(resp.event.id)
    return ids


async def _arrived(receiver: Receiver, path: str, ids: set[str], within: float = 30) -> list[Received]:
    for _ in range(int(within / 0.05)):
        got = [
            r for r in receiver.received() if r.path == path and r.headers.get("x-service-event-id") in ids
        ]
        if {r.headers["x-service-event-id"] for r in got} >= ids:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"not all of {len(ids)} events reached {path}")


async def _attempts(
    stub: webhooks_pb2_grpc.WebhookServiceStub, endpoint_id: str, at_least: int = 1
) -> list[pb.Attempt]:
    for _ in range(600):
        resp = await stub.ListAttempts(
            pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, endpoint_id=endpoint_id, page_size=100)
        )
        if len(resp.attempts) >= at_least:
            return list(resp.attempts)
        await asyncio.sleep(0.05)
    raise AssertionError(f"no attempts of {endpoint_id}")


async def _register(
    stub: webhooks_pb2_grpc.WebhookServiceStub, url: str, auth: pb.ReceiverAuth
) -> pb.RegisterEndpointResponse:
    response: pb.RegisterEndpointResponse = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            account_id=ACCT, environment=LIVE, url=url, events=["booking.confirmed"], receiver_auth=auth
        )
    )
    return response


async def test_client_certificates_oauth2_headers_and_no_secret_at_rest(
    tmp_path: pathlib.Path, pki: Pki, mtls_receiver: Receiver, token_server: TokenServer
) -> None:
    revoked: set[str] = set()

    def bearer_only(r: Received) -> int:
        """The receiver accepts the tokens its token endpoint issued and it has not revoked."""
        token = r.headers.get("authorization", "").removeprefix("Bearer ")
        return 200 if token in token_server.issued and token not in revoked else 401

    oauth_receiver = Receiver(pki.server_context(), responder=bearer_only).start()
    # An uploaded certificate of the platform's CA (as a partner would bring one), and one of another CA.
    uploaded = pki.client_ca.issue_cert("partner.example")
    stranger = trustme.CA().issue_cert("partner.example")
    uploaded_key = uploaded.private_key_pem.bytes().decode()
    key_body = uploaded_key.splitlines()[1]  # a line of the key's base64: must appear nowhere readable
    sealing_key = new_key()
    proc = _webhookd(tmp_path, pki, sealing_key).start(tmp_path / "webhookd.log")
    try:
        async with grpc.aio.insecure_channel(proc.grpc_target) as channel:
            stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
            issued = await _register(
                stub,
                mtls_receiver.url("/platform"),
                pb.ReceiverAuth(client_certificate=pb.ClientCertificate(issued_by_platform=True)),
            )
            up = await _register(
                stub,
                mtls_receiver.url("/uploaded"),
                pb.ReceiverAuth(
                    client_certificate=pb.ClientCertificate(
                        certificate_pem=uploaded.cert_chain_pems[0].bytes().decode(),
                        private_key_pem=uploaded_key,
                    ),
                    headers={"X-Partner-Tenant": "t-42"},
                ),
            )
            wrong = await _register(
                stub,
                mtls_receiver.url("/stranger"),
                pb.ReceiverAuth(
                    client_certificate=pb.ClientCertificate(
                        certificate_pem=stranger.cert_chain_pems[0].bytes().decode(),
                        private_key_pem=stranger.private_key_pem.bytes().decode(),
                    )
                ),
            )
            creds = pb.OAuth2ClientCredentials(
                token_url=f"https://127.0.0.1:{token_server.port}/oauth/token",
                client_id=CLIENT_ID,
                client_secret=CLIENT_SECRET,
                scope="webhooks",
            )
            oauth = await _register(stub, oauth_receiver.url("/oauth"), pb.ReceiverAuth(oauth2=creds))
            bad_creds = pb.OAuth2ClientCredentials(
                token_url=creds.token_url, client_id=CLIENT_ID, client_secret="cs_not-the-right-one"
            )
            refused = await _register(stub, oauth_receiver.url("/refused"), pb.ReceiverAuth(oauth2=bad_creds))

            # What comes back: the certificate's public parts, the token URL and client id; no secret.
            shown = issued.endpoint.receiver_auth.client_certificate
            assert (
                shown.issued_by_platform
                and shown.subject == f"CN={ACCT}"
                and len(shown.sha256_fingerprint) == 64
            )
            assert shown.not_after.seconds > 0 and "BEGIN CERTIFICATE" in shown.certificate_pem
            assert (
                not shown.private_key_pem and not up.endpoint.receiver_auth.client_certificate.private_key_pem
            )
            assert oauth.endpoint.receiver_auth.oauth2.client_id == CLIENT_ID
            assert oauth.endpoint.receiver_auth.oauth2.client_secret == ""
            assert dict(up.endpoint.receiver_auth.headers) == {"X-Partner-Tenant": "t-42"}

            # 20 events: one token request for all of them.
            ids = await _publish(stub, 20)
            await _arrived(mtls_receiver, "/platform", set(ids))
            got = await _arrived(mtls_receiver, "/uploaded", set(ids))
            assert all(r.headers["x-partner-tenant"] == "t-42" for r in got)
            await _arrived(oauth_receiver, "/oauth", set(ids))
            assert len(token_server.issued) == 1
            assert not [r for r in mtls_receiver.received() if r.path == "/stranger"]

            # The receiver stops accepting tok-1: the next delivery is answered 401, webhookd fetches a new
            # token once and the same attempt goes again with it.
            revoked.add(token_server.issued[0])
            more = await _publish(stub, 5)
            await _arrived(oauth_receiver, "/oauth", set(more))
            assert len(token_server.issued) == 2
            attempts = await _attempts(stub, oauth.endpoint.id, 25)
            ok = [a for a in attempts if a.outcome == pb.ATTEMPT_OUTCOME_SUCCEEDED]
            assert len(ok) == len(attempts) == 25  # the 401s were retried within their attempts
            assert {a.request_headers["Authorization"] for a in ok} == {"Bearer (OAuth2 token, not kept)"}

            # A certificate of another CA fails the attempt; so does a token endpoint that refuses us.
            failed = await _attempts(stub, wrong.endpoint.id)
            assert failed[0].outcome == pb.ATTEMPT_OUTCOME_NETWORK_ERROR and failed[0].response_status == 0
            failed = await _attempts(stub, refused.endpoint.id)
            assert failed[0].outcome == pb.ATTEMPT_OUTCOME_NETWORK_ERROR
            assert failed[0].error == "the OAuth2 token endpoint answered HTTP 401 (error invalid_client)"
            assert token_server.refused >= 1

            # Custom headers never override ours, nor carry a credential: 400 naming the header, nothing made.
            before = len(
                (
                    await stub.ListEndpoints(pb.ListEndpointsRequest(account_id=ACCT, environment=LIVE))
                ).endpoints
            )
            for name in ("webhook-id", "Content-Type", "X-Service-Signature", "User-Agent", "Authorization"):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await _register(stub, mtls_receiver.url("/x"), pb.ReceiverAuth(headers={name: "v"}))
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and name in str(
                    err.value.details()
                )
            after = (
                await stub.ListEndpoints(pb.ListEndpointsRequest(account_id=ACCT, environment=LIVE))
            ).endpoints
            assert len(after) == before

            # An update that echoes the certificate's fingerprint and leaves the secret empty keeps both.
            kept = await stub.UpdateEndpoint(
                pb.UpdateEndpointRequest(
                    account_id=ACCT,
                    environment=LIVE,
                    endpoint_id=up.endpoint.id,
                    update_mask=field_mask_pb2.FieldMask(paths=["receiver_auth"]),
                    receiver_auth=pb.ReceiverAuth(
                        client_certificate=pb.ClientCertificate(
                            sha256_fingerprint=up.endpoint.receiver_auth.client_certificate.sha256_fingerprint
                        ),
                        headers={"X-Partner-Tenant": "t-43"},
                    ),
                )
            )
            assert kept.endpoint.receiver_auth.client_certificate.sha256_fingerprint == (
                up.endpoint.receiver_auth.client_certificate.sha256_fingerprint
            )
            again = await _publish(stub, 2)
            got = await _arrived(mtls_receiver, "/uploaded", set(again))
            assert {r.headers["x-partner-tenant"] for r in got} == {"t-43"}
            every_attempt = [
                a for e in (issued, up, wrong, oauth, refused) for a in await _attempts(stub, e.endpoint.id)
            ]
    finally:
        proc.terminate()
        oauth_receiver.stop()
    # No secret readable anywhere but in its sealed column.
    secrets = [CLIENT_SECRET, key_body, *token_server.issued]
    texts = {
        "the log": proc.logs(),
        "the attempt log": "\n".join(str(a) for a in every_attempt),
        "the answers": "\n".join(str(e) for e in (issued, up, wrong, oauth, refused)),
    }
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"a secret in {where}"
    db = sqlite3.connect(tmp_path / "wh.db")
    sealed = db.execute("SELECT receiver_secrets FROM wh_endpoints WHERE receiver_secrets != ''").fetchall()
    assert len(sealed) == 5 and all(s[0].startswith("enc2:") for s in sealed)
    db.execute("UPDATE wh_endpoints SET receiver_secrets = ''")  # the sealed column set aside, in a copy
    db.commit()
    db.execute("VACUUM")
    db.close()
    stored = b"".join(p.read_bytes() for p in sorted(tmp_path.glob("wh.db*")))  # noqa: ASYNC240
    for secret in secrets:
        assert secret.encode() not in stored


async def test_every_delivery_goes_through_the_egress_proxy(
    tmp_path: pathlib.Path, pki: Pki, mtls_receiver: Receiver, token_server: TokenServer, proxy: ConnectProxy
) -> None:
    plain = Receiver(pki.server_context()).start()
    proc = _webhookd(tmp_path, pki, new_key(), "--egress-proxy", f"127.0.0.1:{proxy.port}").start(
        tmp_path / "w.log"
    )
    try:
        async with grpc.aio.insecure_channel(proc.grpc_target) as channel:
            stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
            await _register(stub, plain.url("/plain"), pb.ReceiverAuth())
            await _register(
                stub,
                mtls_receiver.url("/mtls"),
                pb.ReceiverAuth(client_certificate=pb.ClientCertificate(issued_by_platform=True)),
            )
            ids = set(await _publish(stub, 10))
            await _arrived(plain, "/plain", ids)
            await _arrived(mtls_receiver, "/mtls", ids)
    finally:
        proc.terminate()
        plain.stop()
    # Every connection the receivers took came through a tunnel, to the address webhookd checked.
    assert plain.connections + mtls_receiver.connections == len(proxy.targets) >= 2
    assert set(proxy.targets) == {f"127.0.0.1:{plain.port}", f"127.0.0.1:{mtls_receiver.port}"}

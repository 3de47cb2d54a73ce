"""The Sender's side of receivers that authenticate us, against real servers on loopback: a token URL the
SSRF guard refuses at send time fails the attempt before the receiver is called; a client certificate
past its expiry, or without webhookd's own transport, fails the attempt saying so; the headers and the
token's placeholder are what the attempt log keeps."""

from __future__ import annotations

import dataclasses
import datetime as dt
import pathlib
from collections.abc import Iterator

import httpx
import pytest

from svckit.devca import make_ca
from webhookd import Outcome, Policy
from webhookd._client_tls import PlatformCa
from webhookd._http import FastTransport
from webhookd._receiver_auth import OAuth2Credentials, ReceiverAuth
from webhookd._sender import Sender
from webhookd.testing import Receiver, trusted_receiver

NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def receiver(tmp_path: pathlib.Path) -> Iterator[tuple[Receiver, pathlib.Path]]:
    r, ca = trusted_receiver(tmp_path)
    yield r, ca
    r.stop()


async def test_a_token_url_refused_at_send_time_fails_before_the_receiver(
    receiver: tuple[Receiver, pathlib.Path],
) -> None:
    r, ca = receiver
    # Public targets only: the token endpoint (on loopback) is refused at connect; the token is fetched
    # before the delivery, so the receiver is never called.
    transport = FastTransport(Policy(), ca_bundle=str(ca))
    auth = ReceiverAuth(
        "we_1", oauth2=OAuth2Credentials(f"https://127.0.0.1:{r.port}/token", "cid", "s3cret-x")
    )
    async with httpx.AsyncClient(transport=transport) as client:
        sent = await Sender(client, timeout=5, direct=transport).send(
            r.url(), b"{}", ["whsec_x"], "evt_1", NOW, auth=auth
        )
    assert sent.result is Outcome.NETWORK_ERROR and r.count == 0
    assert sent.error.startswith("the OAuth2 token endpoint could not be reached (ConnectError: url: host")
    assert "loopback" in sent.error and "s3cret" not in sent.error


async def test_client_certificates_need_our_transport_and_a_valid_certificate(
    receiver: tuple[Receiver, pathlib.Path],
) -> None:
    r, ca = receiver
    cert = PlatformCa(*make_ca()).issue("acct_1", NOW)
    auth = ReceiverAuth("we_1", mtls=cert, headers=(("X-Tenant", "t1"),))
    transport = FastTransport(Policy(allow_private=True), ca_bundle=str(ca))
    async with httpx.AsyncClient(transport=transport) as client:
        plain = await Sender(client, timeout=5).send(r.url(), b"{}", ["whsec_x"], "evt_1", NOW, auth=auth)
        assert plain.result is Outcome.NETWORK_ERROR
        assert plain.error == "client certificates are sent by webhookd's own transport only"
        sender = Sender(client, timeout=5, direct=transport)
        expired = dataclasses.replace(
            auth, mtls=dataclasses.replace(cert, not_after=NOW - dt.timedelta(days=1))
        )
        late = await sender.send(r.url(), b"{}", ["whsec_x"], "evt_1", NOW, auth=expired)
        assert late.result is Outcome.NETWORK_ERROR and late.error.startswith(
            "the client certificate expired at"
        )
        assert r.count == 0
        # This receiver asks for no certificate: the delivery goes, with the headers, kept in the log.
        ok = await sender.send(r.url(), b"{}", ["whsec_x"], "evt_1", NOW, auth=auth)
        assert ok.result is Outcome.SUCCEEDED and ok.headers["X-Tenant"] == "t1"
        assert r.received()[0].headers["x-tenant"] == "t1"
        assert sender.contexts.built == 1
        await sender.send(r.url(), b"{}", ["whsec_x"], "evt_2", NOW, auth=auth)
        assert sender.contexts.built == 1  # the context is kept, not rebuilt per send

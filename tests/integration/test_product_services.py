"""Product services (certificate ``product:<name>``) as first-class callers: each RPC of their allow list
answered over mutual TLS by real authsvc and webhookd servers, an administering one refused, the client
library's TLS from the environment and its retries, and examples/product_hotels.py run end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import jsonschema
import pytest

from authsvc._server import AuthServer
from authsvc.testing import ACTOR
from examples.product_hotels import Booking, Refused, confirm_booking, connect
from svckit import catalog
from svckit.clients import AuthClient, ClientError, HooksClient, PeerUnavailable
from svckit.devca import files
from svckit.errors import ServiceError, to_grpc_status
from svckit.tls import Tls, TlsError
from tests.support import event_data, tls_of
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd._server import Webhookd

PRODUCT = "product:hotels"


async def partner(
    authsvc: AuthServer, pki: pathlib.Path, scopes: tuple[str, ...] = ("hotels:read", "hotels:write")
) -> tuple[pb.Account, pb.CreateKeyResponse]:
    """A partner account (mode A, 100 searches a day) and a live key, made by svcctl."""
    async with AuthClient(f"127.0.0.1:{authsvc.port}", tls_of(pki, "svcctl")) as admin:
        account = (
            await admin.create_account(
                pb.CreateAccountRequest(
                    name="Partner", mode=pb.ACCOUNT_MODE_A, daily_search_allowance=100, actor=ACTOR
                )
            )
        ).account
        key = await admin.create_key(
            pb.CreateKeyRequest(
                account_id=account.id, environment=pb.ENVIRONMENT_LIVE, scopes=list(scopes), actor=ACTOR
            )
        )
    return account, key


async def test_a_product_certificate_may_call_its_list_and_nothing_that_administers(
    authsvc: AuthServer, webhookd: Webhookd, pki: pathlib.Path
) -> None:
    account, created = await partner(authsvc, pki)
    tls = tls_of(pki, PRODUCT)
    live = pb.ENVIRONMENT_LIVE
    async with (
        AuthClient(f"127.0.0.1:{authsvc.port}", tls) as auth,
        HooksClient(f"127.0.0.1:{webhookd.port}", tls) as hooks,
    ):
        found = await auth.authenticate(pb.AuthenticateRequest(api_key=created.secret))
        assert (found.key.id, found.account.id) == (created.key.id, account.id)
        answer = await auth.authorize(
            pb.AuthorizeRequest(api_key=created.secret, environment=live, required_scope="hotels:read")
        )
        assert answer.decision == pb.DECISION_ALLOW and answer.account.id == account.id
        traveller = await auth.resolve_traveller(
            pb.ResolveTravellerRequest(account_id=account.id, environment=live, partner_ref="cust-1042")
        )
        assert traveller.traveller_id.startswith("trv_")
        got = (await auth.get_account(pb.GetAccountRequest(account_id=account.id))).account
        assert (got.mode, got.status) == (pb.ACCOUNT_MODE_A, pb.ACCOUNT_STATUS_ACTIVE)
        counted = await auth.consume_search(
            pb.ConsumeSearchRequest(account_id=account.id, environment=live, key_id=created.key.id)
        )
        assert counted.counted and counted.usage.searches_used == 1
        usage = await auth.get_usage(pb.GetUsageRequest(account_id=account.id))
        assert usage.usage.searches_used == 1
        # A business error is the service's answer, not the gate's.
        with pytest.raises(ClientError) as missing:
            await auth.get_account(pb.GetAccountRequest(account_id="acct_nope"))
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
        # A product publishes live events (it owns what they report: svckit.peers.may_publish).
        published = await hooks.publish_event(
            wpb.PublishEventRequest(
                account_id=account.id,
                environment=wpb.ENVIRONMENT_LIVE,
                type="booking.cancelled",
                state="cancelled",
                data=event_data("booking.cancelled"),
            )
        )
        assert published.event.id.startswith("evt_")
        # Administering keys, accounts or endpoints: refused by the allow list.
        refused = [
            auth.create_key(
                pb.CreateKeyRequest(
                    account_id=account.id, environment=live, scopes=["hotels:read"], actor=ACTOR
                )
            ),
            auth.list_keys(pb.ListKeysRequest(account_id=account.id)),
            hooks.list_endpoints(
                wpb.ListEndpointsRequest(account_id=account.id, environment=wpb.ENVIRONMENT_LIVE)
            ),
        ]
        for call in refused:
            with pytest.raises(ClientError) as denied:
                await call
            assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert f"the service {PRODUCT!r} may not call" in denied.value.detail
    async with AuthClient(f"127.0.0.1:{authsvc.port}", tls_of(pki, "svcctl")) as admin:
        keys = await admin.list_keys(pb.ListKeysRequest(account_id=account.id))
        assert [k.id for k in keys.keys] == [created.key.id]  # the refused CreateKey made nothing


def product_env(pki: pathlib.Path, monkeypatch: pytest.MonkeyPatch, authsvc: int, webhookd: int) -> None:
    ca, cert, key = files(pki, PRODUCT)
    for name, value in (
        ("HOTELS_TLS_CA", ca),
        ("HOTELS_TLS_CERT", cert),
        ("HOTELS_TLS_KEY", key),
        ("HOTELS_AUTHSVC", f"127.0.0.1:{authsvc}"),
        ("HOTELS_WEBHOOKD", f"127.0.0.1:{webhookd}"),
    ):
        monkeypatch.setenv(name, value)


async def test_the_product_example_runs_against_real_servers(
    authsvc: AuthServer, webhookd: Webhookd, pki: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account, created = await partner(authsvc, pki)
    _, read_only = await partner(authsvc, pki, scopes=("hotels:read",))
    product_env(pki, monkeypatch, authsvc.port, webhookd.port)
    booking = Booking("bk_7f3a", "off_hotels_1", 25800, "EUR", "HX-99812", "hold_7f3a")
    auth, hooks = connect("HOTELS")
    async with auth, hooks:
        event_id = await confirm_booking(
            auth, hooks, created.secret, booking, live=True, request_id="req_ex1"
        )
        # Sent again (the partner retried): the idempotency key gives the first event back.
        again = await confirm_booking(auth, hooks, created.secret, booking, live=True, request_id="req_ex2")
        assert again == event_id
        with pytest.raises(Refused) as refused:
            await confirm_booking(auth, hooks, read_only.secret, booking, live=True, request_id="req_ex3")
        assert refused.value.type == "missing_scope"
        usage = await auth.get_usage(pb.GetUsageRequest(account_id=account.id))
        assert usage.usage.searches_used == 2  # each confirmation counted its search
    async with HooksClient(f"127.0.0.1:{webhookd.port}", tls_of(pki, "svcctl")) as admin:
        read = wpb.GetEventRequest(account_id=account.id, environment=wpb.ENVIRONMENT_LIVE, event_id=event_id)
        event = (await admin.get_event(read)).event
    envelope = json.loads(event.envelope_json)
    jsonschema.validate(envelope, catalog.envelope_schema("booking.confirmed"))
    assert envelope["livemode"] is True and envelope["account"] == account.id
    assert envelope["data"]["hold"] == "hold_7f3a" and envelope["data"]["amount"] == 25800


def test_tls_from_the_environment(pki: pathlib.Path, tmp_path: pathlib.Path) -> None:
    ca, cert, key = files(pki, PRODUCT)
    env = {"HOTELS_TLS_CA": ca, "HOTELS_TLS_CERT": cert, "HOTELS_TLS_KEY": key}
    assert Tls.from_env("hotels", env).identity == PRODUCT
    with pytest.raises(TlsError, match=r"^HOTELS_TLS_KEY: not set"):
        Tls.from_env("HOTELS", {**env, "HOTELS_TLS_KEY": ""})
    with pytest.raises(TlsError, match=r"^HOTELS_TLS_CERT: No such file"):
        Tls.from_env("HOTELS", {**env, "HOTELS_TLS_CERT": str(tmp_path / "none.pem")})
    with pytest.raises(TlsError, match=r"^HOTELS_TLS_CA: no PEM certificate"):
        Tls.from_env("HOTELS", {**env, "HOTELS_TLS_CA": key})
    assert Tls.from_files(ca, cert, key) == Tls.from_env("HOTELS", env)


# -- retries on UNAVAILABLE --------------------------------------------------------------------------------
def unavailable() -> Any:
    return to_grpc_status(ServiceError("restarting", type="service_unavailable"))


class FlakyHooks(webhooks_pb2_grpc.WebhookServiceServicer):
    """PublishEvent: UNAVAILABLE the first ``failures`` times, then the event."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def PublishEvent(self, request: wpb.PublishEventRequest, context: Any) -> wpb.PublishEventResponse:
        self.calls += 1
        if self.calls <= self.failures:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return wpb.PublishEventResponse(event=wpb.Event(id="evt_1", type=request.type))


class FlakyAuth(auth_pb2_grpc.AuthServiceServicer):
    """GetAccount and ConsumeSearch: UNAVAILABLE the first time each is called, then an answer."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def _flaky(self, name: str, context: Any) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.calls[name] == 1:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")

    async def GetAccount(self, request: pb.GetAccountRequest, context: Any) -> pb.GetAccountResponse:
        await self._flaky("GetAccount", context)
        return pb.GetAccountResponse(account=pb.Account(id=request.account_id))

    async def ConsumeSearch(self, request: pb.ConsumeSearchRequest, context: Any) -> pb.ConsumeSearchResponse:
        await self._flaky("ConsumeSearch", context)
        return pb.ConsumeSearchResponse(counted=True)


@contextlib.asynccontextmanager
async def serving(add: Any, servicer: Any) -> AsyncIterator[str]:
    server = grpc.aio.server()
    add(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


def publish(key: str) -> wpb.PublishEventRequest:
    return wpb.PublishEventRequest(
        account_id="acct_1",
        environment=wpb.ENVIRONMENT_LIVE,
        type="booking.confirmed",
        data=event_data("booking.confirmed"),
        idempotency_key=key,
    )


async def test_a_publish_with_an_idempotency_key_is_retried_and_one_without_is_not() -> None:
    servicer = FlakyHooks(failures=2)  # type: ignore[abstract]  # implements only PublishEvent
    async with serving(webhooks_pb2_grpc.add_WebhookServiceServicer_to_server, servicer) as address:
        async with HooksClient(address, None, timeout=5.0) as hooks:
            assert (await hooks.publish_event(publish("bk_1:confirmed"))).event.id == "evt_1"
            assert servicer.calls == 3
            servicer.calls, servicer.failures = 0, 1
            with pytest.raises(PeerUnavailable):
                await hooks.publish_event(publish(""))
            assert servicer.calls == 1
            servicer.calls, servicer.failures = 0, 5  # three attempts, then the error
            with pytest.raises(PeerUnavailable):
                await hooks.publish_event(publish("bk_2:confirmed"))
            assert servicer.calls == 3


async def test_reads_are_retried_and_consume_search_is_not() -> None:
    servicer = FlakyAuth()  # type: ignore[abstract]  # implements only GetAccount and ConsumeSearch
    async with serving(auth_pb2_grpc.add_AuthServiceServicer_to_server, servicer) as address:
        async with AuthClient(address, None, timeout=5.0) as auth:
            got = await auth.get_account(pb.GetAccountRequest(account_id="acct_1"))
            assert got.account.id == "acct_1" and servicer.calls["GetAccount"] == 2
            with pytest.raises(PeerUnavailable):
                await auth.consume_search(pb.ConsumeSearchRequest(account_id="acct_1"))
            await asyncio.sleep(0)
            assert servicer.calls["ConsumeSearch"] == 1

"""The event catalog is the law for every publisher, over real mutual TLS against a real webhookd: every
identity publishes every kind in both environments and only the catalog's publishers succeed (the others
are refused and nothing of theirs is stored); an event whose state or data its kind refuses is refused
with the field named, in the message and in the ErrorInfo, and nothing is stored; a publish without a
state stores the catalog's state; the client library refuses the same events the same way, locally."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from jsonschema import Draft202012Validator, FormatChecker
from prometheus_client import REGISTRY

from svckit import catalog
from svckit.catalog import EVENT_KINDS
from svckit.clients import ClientError, HooksClient
from svckit.clients.hooks import event_error
from svckit.devca import IDENTITIES, init_dir
from svckit.peers import allowed
from svckit.protos import struct
from tests.support import tls_of
from tests.unit.test_publish_decision import EXPECTED, data_for, expected
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd._server import Config, Webhookd, run_server

PRODUCTS = ("product:hotels", "product:flights", "product:esim", "product:unknown")
# Every identity of the unit table that a certificate can carry ("" is a plaintext server's caller).
CALLERS = [i for i in EXPECTED if i and i != "product:"]
ENVS = {"live": wpb.ENVIRONMENT_LIVE, "sandbox": wpb.ENVIRONMENT_SANDBOX}
PUBLISH = "/travel.webhooks.v1.WebhookService/PublishEvent"


@pytest.fixture(scope="module")
def every_pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("pki-publishers")
    init_dir(directory, (*IDENTITIES, *PRODUCTS, "billing", "unknown"))
    return directory


@pytest.fixture
async def hooks_server(tmp_path: pathlib.Path, every_pki: pathlib.Path) -> AsyncIterator[Webhookd]:
    config = Config(
        database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
        listen="127.0.0.1:0",
        tls=tls_of(every_pki, "webhookd"),
    )
    app = await run_server(config, start_worker=False)
    try:
        yield app
    finally:
        await app.stop(0)


def request(
    account: str, env: str, kind: str, data: dict[str, Any], state: str = ""
) -> wpb.PublishEventRequest:
    return wpb.PublishEventRequest(
        account_id=account, environment=ENVS[env], type=kind, state=state, data=struct(data)
    )


async def stored(server: Webhookd, pki: pathlib.Path, account: str, env: str) -> list[wpb.Event]:
    async with HooksClient(f"127.0.0.1:{server.port}", tls_of(pki, "svcctl")) as admin:
        listed = await admin.list_events(
            wpb.ListEventsRequest(account_id=account, environment=ENVS[env], page_size=100)
        )
    return list(listed.events)


def refused_count(publisher: str, reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "webhook_events_refused_total", {"publisher": publisher, "reason": reason}
    )
    return value or 0.0


async def test_only_the_catalogs_publishers_publish_each_kind(
    hooks_server: Webhookd, every_pki: pathlib.Path
) -> None:
    before = refused_count("product:hotels", "not_a_publisher")
    for n, identity in enumerate(CALLERS):
        # The allow list comes first: webhookd itself and the portal never reach PublishEvent's decision.
        listed = allowed(identity, PUBLISH)
        async with HooksClient(f"127.0.0.1:{hooks_server.port}", tls_of(every_pki, identity)) as hooks:
            for env in ("live", "sandbox"):
                may = [kind for kind in EVENT_KINDS if expected(identity, kind, env)]
                account = f"acct_caller{n}"
                for kind in EVENT_KINDS:
                    data = data_for(identity, kind)
                    published = request(account, env, kind, data)
                    if kind in may and listed:
                        answer = await hooks.publish_event(published)
                        assert answer.event.type == kind, (identity, env, kind)
                        continue
                    with pytest.raises(ClientError) as refused:
                        await hooks.publish_event(published)
                    assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED, (identity, env, kind)
                    # The catalog's refusal names its rule (ErrorInfo forbidden); the allow list's is bare.
                    assert refused.value.type == ("forbidden" if listed else "internal_error")
                events = await stored(hooks_server, every_pki, account, env)
                assert sorted(e.type for e in events) == sorted(may if listed else ()), (identity, env)
    assert not allowed("webhookd", PUBLISH) and not allowed("portal", PUBLISH)
    # Counted per publisher and reason: product:hotels tried every kind not its own, in each environment.
    others = sum(not expected("product:hotels", kind, "live") for kind in EVENT_KINDS)
    assert refused_count("product:hotels", "not_a_publisher") - before == 2 * others


BAD: list[tuple[str, str, dict[str, Any], str, str]] = [
    # kind, state, data, the field named, words of the message
    ("booking.confirmed", "weird", catalog.example("booking.confirmed"), "state", "'weird' is not a state"),
    (
        "booking.confirmed",
        "",
        {**catalog.example("booking.confirmed"), "amount": "12"},
        "data.amount",
        "'12' is not of type 'integer'",
    ),
    ("booking.confirmed", "", {"booking_id": "bk_x", "product": "hotels"}, "data.booking_id", "not a field"),
    (
        "booking.confirmed",
        "",
        {k: v for k, v in catalog.example("booking.confirmed").items() if k != "offer"},
        "data.offer",
        "is required",
    ),
    (
        "booking.confirmed",
        "",
        {**catalog.example("booking.confirmed"), "payment": "pay_x"},
        "data",
        "exactly one of: hold / payment",
    ),
    (
        "booking.modified",
        "modified",  # the verb is not its state: a modified booking stays confirmed
        catalog.example("booking.modified"),
        "state",
        "states: confirmed",
    ),
    (
        "booking.cancelled",
        "",
        {**catalog.example("booking.cancelled"), "currency": "eur"},
        "data.currency",
        "eur",
    ),
]


@pytest.mark.parametrize(("kind", "state", "data", "field", "words"), BAD)
async def test_an_invalid_event_is_refused_with_its_field_and_nothing_is_stored(
    hooks_server: Webhookd,
    every_pki: pathlib.Path,
    kind: str,
    state: str,
    data: dict[str, Any],
    field: str,
    words: str,
) -> None:
    for env in ENVS:
        published = request("acct_bad", env, kind, data, state)
        local = event_error(published)
        assert local is not None and local.field == field and words in local.detail
        async with HooksClient(
            f"127.0.0.1:{hooks_server.port}", tls_of(every_pki, "product:hotels")
        ) as hooks:
            # The client library refuses it without a call...
            with pytest.raises(ClientError) as refused:
                await hooks.publish_event(published)
            assert (refused.value.type, refused.value.field, refused.value.detail) == (
                "invalid_request",
                field,
                local.detail,
            )
            # ...and webhookd, sent it anyway, answers the same.
            stub = webhooks_pb2_grpc.WebhookServiceStub(hooks.channel)
            with pytest.raises(grpc.aio.AioRpcError) as answered:
                await stub.PublishEvent(published)
        assert answered.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert answered.value.details() == local.detail
        status = rpc_status.from_call(answered.value)
        assert status is not None
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info)
        assert info.reason == "invalid_request" and info.metadata["field"] == field
        assert await stored(hooks_server, every_pki, "acct_bad", env) == []


def publisher_of(kind: str) -> tuple[str, str]:
    """A certificate that may publish ``kind`` and the environment: its first publisher (live), or the
    sandbox's for webhookd's own kinds (webhookd publishes them itself, not through PublishEvent)."""
    first = catalog.kind_of(kind).publishers[0]
    return ("edge", "sandbox") if first == "webhookd" else (first, "live")


async def test_a_publish_without_state_stores_the_catalogs_state(
    hooks_server: Webhookd, every_pki: pathlib.Path
) -> None:
    for kind in EVENT_KINDS:
        identity, env = publisher_of(kind)
        async with HooksClient(f"127.0.0.1:{hooks_server.port}", tls_of(every_pki, identity)) as hooks:
            answer = await hooks.publish_event(request("acct_nostate", env, kind, data_for(identity, kind)))
        envelope = json.loads(answer.event.envelope_json)
        assert envelope["state"] == catalog.kind_of(kind).state, kind
        validator = Draft202012Validator(catalog.envelope_schema(kind), format_checker=FormatChecker())
        assert not list(validator.iter_errors(envelope)), kind

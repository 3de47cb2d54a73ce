"""Destination settings (webhookd._destination_settings) and the worker's seam (webhookd._destinations):
what a broker URL means, what is stored in the clear and what sealed, credentials kept on an update that
leaves them out, a type without a sender failing its attempt, polling never sent to."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest

from edge.destinations import PATTERNS
from svckit.webhook_status import DeliveryStatus, DestinationType, EndpointStatus
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd._destination_settings import (
    AmqpSettings,
    NatsSettings,
    amqp_settings,
    nats_settings,
    settings_of,
    shown_target,
    stored_json,
)
from webhookd._destinations import Deferred, Destinations
from webhookd._errors import InvalidRequest
from webhookd._repository import Claim, DeliveryRecord, EndpointRecord, SigningSecret
from webhookd._retry import Outcome
from webhookd._sender import Sender

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)

URLS: list[tuple[str, tuple[str, int, str, str, bool]]] = [
    ("amqp://rabbit.partner.example", ("rabbit.partner.example", 5672, "/", "", False)),
    ("amqps://svc@rabbit.partner.example/", ("rabbit.partner.example", 5671, "/", "svc", True)),
    ("amqp://svc@rabbit.partner.example:5673/%2F", ("rabbit.partner.example", 5673, "/", "svc", False)),
    ("amqp://svc@10.1.2.3/bookings", ("10.1.2.3", 5672, "bookings", "svc", False)),
    ("amqp://a%40b@h/v%2Fw", ("h", 5672, "v/w", "a@b", False)),
]


@pytest.mark.parametrize(("url", "want"), URLS)
def test_an_amqp_url_names_host_port_vhost_user_and_tls(url: str, want: tuple[Any, ...]) -> None:
    s = amqp_settings(pb.AmqpDestination(url=url, exchange="x", routing_key="k"))
    assert (s.host, s.port, s.vhost, s.user, s.tls) == want
    assert amqp_settings(pb.AmqpDestination(url=s.url, exchange="x")).pool_key() == s.pool_key()


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("", "amqp.url: is required"),
        ("amqp://u:pw@h/", "must not contain a password"),
        ("https://h/", "must start with amqp:// or amqps://"),
        ("amqp://h/?heartbeat=1", "query"),
        ("amqp://h:0x/", "not a valid URL"),
        ("amqp:///v", "has no host"),
    ],
)
def test_bad_amqp_urls_name_the_field(url: str, field: str) -> None:
    with pytest.raises(InvalidRequest, match=r"amqp\.url") as info:
        amqp_settings(pb.AmqpDestination(url=url))
    assert field in str(info.value)


def test_credentials_are_stored_apart_and_kept_when_an_update_leaves_them_out() -> None:
    s = amqp_settings(pb.AmqpDestination(url="amqp://svc@h/v", exchange="x", routing_key="k", password="pw"))
    clear, secret = stored_json(s)
    assert "pw" not in clear and json.loads(secret) == {"password": "pw"}
    assert settings_of(DestinationType.AMQP, clear, secret) == s
    assert "pw" not in repr(s)
    kept = amqp_settings(pb.AmqpDestination(url="amqp://svc@h/v", exchange="y"), stored=s)
    assert kept.password == "pw" and kept.exchange == "y"
    n = nats_settings(pb.NatsDestination(servers=["nats://h:4222", "tls://g"], subject="a.b", token="t"))
    clear, secret = stored_json(n)
    assert "token" not in clear and settings_of(DestinationType.NATS, clear, secret) == n
    assert [x.url for x in n.servers] == ["nats://h:4222", "tls://g:4222"]
    again = nats_settings(pb.NatsDestination(servers=["nats://h"], subject="a.c"), stored=n)
    assert again.token == "t"
    # A login replaces a stored token, and a token a stored login; both at once are refused.
    login = nats_settings(
        pb.NatsDestination(servers=["nats://h"], subject="a", user="u", password="p"), stored=n
    )
    assert (login.user, login.password, login.token) == ("u", "p", "")
    back = nats_settings(pb.NatsDestination(servers=["nats://h"], subject="a", token="t2"), stored=login)
    assert (back.user, back.password, back.token) == ("", "", "t2")
    with pytest.raises(InvalidRequest, match=r"nats\.token"):
        nats_settings(pb.NatsDestination(servers=["nats://h"], subject="a", user="u", token="t"))
    assert stored_json(None) == ("", "") and settings_of(DestinationType.HTTP, "", "") is None


SHOWN: list[tuple[DestinationType, str, Any, str]] = [
    (DestinationType.HTTP, "https://p.example/hook", None, "https://p.example/hook"),
    (DestinationType.POLLING, "", None, "polling"),
    (
        DestinationType.AMQP,
        "",
        pb.AmqpDestination(
            url="amqps://svc@rabbit.p.example/%2F", exchange="ev", routing_key="bk", password="pw"
        ),
        "amqps://rabbit.p.example:5671/%2F ev/bk",
    ),
    (
        DestinationType.AMQP,
        "",
        pb.AmqpDestination(url="amqp://svc@10.1.2.3:5673/v%2Fw", routing_key="q", password="pw"),
        "amqp://10.1.2.3:5673/v%2Fw (default)/q",
    ),
    (
        DestinationType.NATS,
        "",
        pb.NatsDestination(servers=["nats://n1", "tls://n2:4333"], subject="a.b", user="u", password="pw"),
        "nats://n1:4222 tls://n2:4333 a.b",
    ),
]


@pytest.mark.parametrize(("kind", "url", "destination", "shown"), SHOWN)
def test_a_destination_is_named_in_one_line_without_a_credential(
    kind: DestinationType, url: str, destination: Any, shown: str
) -> None:
    """What a disable e-mail and the endpoint.* events say of an endpoint (``url``): a broker's has none."""
    settings: AmqpSettings | NatsSettings | None = None
    if isinstance(destination, pb.AmqpDestination):
        settings = amqp_settings(destination)
    elif isinstance(destination, pb.NatsDestination):
        settings = nats_settings(destination)
    clear, _secret = stored_json(settings)
    got = shown_target(kind, url, clear)
    assert got == shown
    assert "pw" not in got and "svc" not in got and "u@" not in got


def _endpoint(
    kind: DestinationType, destination: AmqpSettings | NatsSettings | None = None
) -> EndpointRecord:
    return EndpointRecord(
        "we_1", "acct_1", "live", "", ["*"], "", EndpointStatus.ENABLED, "", NOW, NOW,
        [SigningSecret("whsec_x")], destination_type=kind, destination=destination,
    )  # fmt: skip


async def test_a_type_without_a_sender_fails_its_attempt_saying_so() -> None:
    destinations = Destinations(Sender(None))  # type: ignore[arg-type]
    sent = await destinations.send(_endpoint(DestinationType.NATS), b"{}", "evt_1", NOW)
    assert sent.result is Outcome.NETWORK_ERROR and "no sender for nats" in sent.error


class _Made:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.closed = False

    async def send(self, endpoint: EndpointRecord, body: bytes, event_id: str, now: dt.datetime) -> Any:
        self.sent.append(event_id)
        return event_id

    async def close(self) -> None:
        self.closed = True


async def test_a_deferred_destination_is_made_at_its_first_send_once_and_closed_only_if_made() -> None:
    made: list[_Made] = []

    def make() -> _Made:
        made.append(_Made())
        return made[-1]

    idle = Deferred(make)
    await idle.close()
    assert made == []  # never sent to: never made (its library never imported)
    deferred = Deferred(make)
    endpoint = _endpoint(DestinationType.AMQP)
    answers = [await deferred.send(endpoint, b"{}", event_id, NOW) for event_id in ("evt_1", "evt_2")]
    assert answers == ["evt_1", "evt_2"]  # type: ignore[comparison-overlap]
    assert len(made) == 1 and made[0].sent == ["evt_1", "evt_2"]
    await deferred.close()
    assert made[0].closed


def test_polling_endpoints_are_never_pushed_and_their_claims_are_held_by_default() -> None:
    destinations = Destinations(Sender(None))  # type: ignore[arg-type]
    assert not destinations.pushes(_endpoint(DestinationType.POLLING))
    assert all(destinations.pushes(_endpoint(k)) for k in DestinationType if k is not DestinationType.POLLING)
    delivery = DeliveryRecord(
        "msg_1",
        "evt_1",
        "we_1",
        "acct_1",
        "live",
        "booking.confirmed",
        DeliveryStatus.PENDING,
        0,
        0,
        NOW,
        NOW,
        NOW,
    )
    result = destinations.pulled(Claim(delivery, b"{}", _endpoint(DestinationType.POLLING)), NOW)
    assert result.status is DeliveryStatus.HELD and result.attempt is None and not result.counts_attempt


@pytest.mark.parametrize(
    "subject", ["$zp", "$JS.API.X", "a..b", ".a", "a.", "a b", "a.*", "a.>", "bookings", "#x", "%y", "a.$b"]
)
def test_the_openapi_subject_pattern_says_what_webhookd_checks(subject: str) -> None:
    """schemathesis generated "$zp" from a pattern whose first-character class let "$" through: the
    document's pattern and webhookd's check must agree on every subject."""
    by_pattern = re.fullmatch(PATTERNS["nats.subject"], subject) is not None
    try:
        nats_settings(pb.NatsDestination(servers=["nats://nats.partner.example:4222"], subject=subject))
        by_webhookd = True
    except InvalidRequest:
        by_webhookd = False
    assert by_pattern == by_webhookd

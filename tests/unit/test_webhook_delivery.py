"""The worker's pure decision and the Sender, with httpx.MockTransport standing in for the network."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from svckit.signing import USER_AGENT
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd import Outcome, verify
from webhookd._outcome import decide
from webhookd._repository import (
    Claim,
    DeliveryRecord,
    EndpointRecord,
    SigningSecret,
)
from webhookd._sender import RESPONSE_KEEP, Sender

NOW = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)
SECRET = "whsec_" + "A" * 44


def _claim(
    status: EndpointStatus = EndpointStatus.ENABLED,
    attempts: int = 0,
    schedule: int = 0,
    endpoint: bool = True,
    kind: str = "booking.confirmed",
) -> Claim:
    d = DeliveryRecord("msg_1", "evt_1", "we_1", "acct_1", "live", kind, DeliveryStatus.PENDING, attempts,
                       schedule, NOW, NOW, NOW)  # fmt: skip
    ep = EndpointRecord("we_1", "acct_1", "live", "https://x.test/h", ["booking.confirmed"], "", status, "",
                        NOW, NOW, [SigningSecret(SECRET)])  # fmt: skip
    return Claim(d, b'{"id":"evt_1"}', ep if endpoint else None)


def _sent(outcome: Outcome, status: int = 0) -> object:
    from webhookd._sender import SendResult

    return SendResult(outcome, status, "", {}, 1.0, "" if outcome.ok else "boom")


@pytest.mark.parametrize(
    ("claim", "outcome", "status", "next_at", "attempt_number", "disable"),
    [
        (_claim(endpoint=False), None, DeliveryStatus.FAILED, None, None, False),
        (_claim(EndpointStatus.DISABLED), None, DeliveryStatus.HELD, None, None, False),
        (_claim(), Outcome.SUCCEEDED, DeliveryStatus.SUCCEEDED, None, 1, False),
        (_claim(), Outcome.HTTP_ERROR, DeliveryStatus.PENDING, NOW + dt.timedelta(minutes=1), 1, False),
        (
            _claim(attempts=3, schedule=3),
            Outcome.TIMEOUT,
            DeliveryStatus.PENDING,
            NOW + dt.timedelta(hours=2),
            4,
            False,
        ),
        (_claim(attempts=6, schedule=6), Outcome.NETWORK_ERROR, DeliveryStatus.FAILED, None, 7, True),
        # A test send is a single attempt: no retry, no disabling.
        (_claim(kind="webhook.test"), Outcome.HTTP_ERROR, DeliveryStatus.FAILED, None, 1, False),
        (_claim(kind="webhook.test"), Outcome.SUCCEEDED, DeliveryStatus.SUCCEEDED, None, 1, False),
        # After a recover the schedule starts again while the attempt count goes on.
        (
            _claim(attempts=9, schedule=0),
            Outcome.HTTP_ERROR,
            DeliveryStatus.PENDING,
            NOW + dt.timedelta(minutes=1),
            10,
            False,
        ),
    ],
)
def test_decide_table(
    claim: Claim,
    outcome: Outcome | None,
    status: str,
    next_at: dt.datetime | None,
    attempt_number: int | None,
    disable: bool,
) -> None:
    sent = _sent(outcome) if outcome else None
    out = decide(claim, sent, NOW)  # type: ignore[arg-type]
    assert (out.status, out.next_attempt_at, out.disable_endpoint) == (status, next_at, disable)
    assert (out.attempt.attempt_number if out.attempt else None) == attempt_number
    assert out.counts_attempt is (out.attempt is not None)


def _client(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_sender_posts_signed_raw_body_and_keeps_4k_of_response() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500, content=b"x" * 10_000)

    async with _client(handler) as client:
        result = await Sender(client).send("https://x.test/h", b'{"id":"evt_1"}', [SECRET], "evt_1", NOW)
    (req,) = seen
    assert req.method == "POST" and req.content == b'{"id":"evt_1"}'
    assert req.headers["content-type"] == "application/json" and req.headers["user-agent"] == USER_AGENT
    assert req.headers["x-service-event-id"] == "evt_1"
    verify(req.content, req.headers["x-service-signature"], SECRET, NOW)
    assert result.result is Outcome.HTTP_ERROR and result.status == 500
    assert len(result.body) == RESPONSE_KEEP and "500" in result.error
    assert result.headers["X-Service-Signature"] == req.headers["x-service-signature"]


async def test_a_nul_in_the_answer_is_kept_as_a_replacement_character() -> None:
    # PostgreSQL refuses NUL in text: kept as is, it would fail every cycle that writes this attempt.
    async with _client(lambda request: httpx.Response(200, content=b"ok\x00\xff")) as client:
        result = await Sender(client).send("https://x.test/h", b"{}", [SECRET], "evt_1", NOW)
    assert result.body == "ok\ufffd\ufffd"


@pytest.mark.parametrize(
    ("response", "outcome"),
    [
        (httpx.Response(200), Outcome.SUCCEEDED),
        (httpx.Response(204), Outcome.SUCCEEDED),
        (httpx.Response(299), Outcome.SUCCEEDED),
        (httpx.Response(302, headers={"Location": "https://elsewhere.test/"}), Outcome.HTTP_ERROR),
        (httpx.Response(404), Outcome.HTTP_ERROR),
        (httpx.ConnectTimeout("slow"), Outcome.TIMEOUT),
        (httpx.ReadTimeout("slow"), Outcome.TIMEOUT),
        (httpx.ConnectError("refused"), Outcome.NETWORK_ERROR),
        (httpx.RemoteProtocolError("garbage"), Outcome.NETWORK_ERROR),
    ],
)
async def test_sender_outcomes(response: httpx.Response | Exception, outcome: Outcome) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(response, Exception):
            raise response
        return response

    async with _client(handler) as client:
        result = await Sender(client).send("https://x.test/h", b"{}", [SECRET], "evt_1", NOW)
    assert result.result is outcome
    assert (result.error == "") is outcome.ok


def test_a_sender_times_out_in_every_event_loop_it_is_used_in() -> None:
    """The timeout watchdog is armed per loop: a Sender outliving one loop still times out in the next."""
    import asyncio

    async def hang(_request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        return httpx.Response(200)

    sender = Sender(httpx.AsyncClient(transport=httpx.MockTransport(hang)), timeout=0.05)

    async def once() -> Outcome:
        sent = await sender.send("https://hooks.partner.test/h", b"{}", ["whsec_x"], "evt_1", NOW)
        return sent.result

    assert asyncio.run(once()) is Outcome.TIMEOUT
    assert asyncio.run(once()) is Outcome.TIMEOUT


@pytest.mark.parametrize(
    ("headers", "kept"),
    [
        ([], {}),
        (
            [(b"Content-Type", b"text/plain"), (b"X-Request-Id", b"r1")],
            {"content-type": "text/plain", "x-request-id": "r1"},
        ),
        # A repeated name: its values in order, joined as RFC 9110 combines field lines.
        ([(b"vary", b"accept"), (b"x", b"1"), (b"vary", b"origin")], {"vary": "accept, origin", "x": "1"}),
        ([(b"x-name", "caf\u00e9".encode())], {"x-name": "caf\u00e9"}),
        ([(b"x-bad", b"\xff")], {"x-bad": "\ufffd"}),
        # The cap counts names and values: what fits is kept, the header that passes it and the rest dropped.
        ([(b"a", b"x" * 4095), (b"b", b"y")], {"a": "x" * 4095}),
        ([(b"a", b"x" * 4094), (b"b", b"")], {"a": "x" * 4094, "b": ""}),
        ([(b"a", b"x" * 5000), (b"b", b"y")], {}),
        ([(f"h{i:03d}".encode(), b"v" * 95) for i in range(100)], {f"h{i:03d}": "v" * 95 for i in range(41)}),
    ],
)
def test_kept_response_headers_table(headers: list[tuple[bytes, bytes]], kept: dict[str, str]) -> None:
    from webhookd._sender import RESPONSE_HEADERS_KEEP, kept_headers

    assert RESPONSE_HEADERS_KEEP == 4096
    assert kept_headers(headers) == kept


def test_statuses_and_the_proto_enums_name_each_other() -> None:
    from svckit.prototables import DELIVERY_STATUS, ENDPOINT_STATUS
    from travel.webhooks.v1 import webhooks_pb2 as pb

    # webhookd's tables are svckit's now: {stored word: proto number}, as webhookd's own were.
    DELIVERY_STATUS_TO_PB = {word: n for n, word in DELIVERY_STATUS.names().items()}
    ENDPOINT_STATUS_TO_PB = {word: n for n, word in ENDPOINT_STATUS.names().items()}

    for mapping, enum, prefix in (
        (DELIVERY_STATUS_TO_PB, pb.DeliveryStatus, "DELIVERY_STATUS_"),
        (ENDPOINT_STATUS_TO_PB, pb.EndpointStatus, "ENDPOINT_STATUS_"),
    ):
        named = {v for k, v in enum.items() if k != f"{prefix}UNSPECIFIED"}
        assert sorted(mapping.values()) == sorted(named)  # every proto status is one of ours, once
        # (the table's numbers are plain ints; each proto enum's Name takes its own NewType of int)
        assert all(enum.Name(v) == prefix + s.upper() for s, v in mapping.items())  # type: ignore[arg-type]
    assert DELIVERY_STATUS_TO_PB["held"] == pb.DELIVERY_STATUS_HELD  # stored strings look up as well

"""The endpoint, events, delivery and sandbox clock pages' decisions (portal.webhook_views)."""

from __future__ import annotations

import datetime as dt
import json
from urllib.parse import parse_qsl

import pytest
from google.protobuf import timestamp_pb2

from portal.webhook_views import (
    CLOCK_CHOICES,
    clock_back,
    clock_notice,
    clock_span,
    delivery_in,
    filter_json,
    filter_query,
    filtered_out,
    has_event_page,
    newest_first,
    ordering_number,
    ordering_word,
    payload_number,
    payload_word,
    pretty_json,
    recover_notice,
    recover_question,
    scheme_number,
    scheme_word,
    signs_ed25519,
)
from svckit.clients import ClientError
from travel.webhooks.v1 import webhooks_pb2 as wpb


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"id":"evt_1","data":{"n":1}}', '{\n  "id": "evt_1",\n  "data": {\n    "n": 1\n  }\n}'),
        ('{"b":1,"a":2}', '{\n  "b": 1,\n  "a": 2\n}'),  # the order delivered, not sorted
        ('{"city":"Zürich"}', '{\n  "city": "Zürich"\n}'),
        ('{"x":"<script>"}', '{\n  "x": "<script>"\n}'),  # escaped by the template, not here
        ("not json", "not json"),
        ("", ""),
    ],
)
def test_pretty_json(text: str, shown: str) -> None:
    assert pretty_json(text) == shown


def _attempt(id: str, number: int, seconds: int, nanos: int = 0) -> wpb.Attempt:
    return wpb.Attempt(
        id=id, attempt_number=number, attempted_at=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)
    )


@pytest.mark.parametrize(
    ("attempts", "order"),
    [
        ([], []),
        ([_attempt("a1", 1, 100), _attempt("a2", 2, 160), _attempt("a3", 3, 400)], ["a3", "a2", "a1"]),
        ([_attempt("a3", 3, 400), _attempt("a1", 1, 100), _attempt("a2", 2, 160)], ["a3", "a2", "a1"]),
        # A manual resend is newer than the schedule's later-numbered failure before it.
        ([_attempt("a1", 1, 100), _attempt("a2", 2, 160), _attempt("m", 2, 500)], ["m", "a2", "a1"]),
        ([_attempt("a1", 1, 100, 5), _attempt("a2", 2, 100, 7)], ["a2", "a1"]),
        ([_attempt("a1", 1, 100), _attempt("a2", 2, 100)], ["a2", "a1"]),
    ],
)
def test_attempts_newest_first(attempts: list[wpb.Attempt], order: list[str]) -> None:
    assert [a.id for a in newest_first(attempts)] == order


@pytest.mark.parametrize(
    ("ids", "wanted", "found"),
    [(["msg_1", "msg_2"], "msg_2", True), (["msg_1"], "msg_9", False), ([], "msg_1", False)],
)
def test_delivery_in(ids: list[str], wanted: str, found: bool) -> None:
    got = delivery_in([wpb.Delivery(id=i) for i in ids], wanted)
    assert (got is not None and got.id == wanted) == found


@pytest.mark.parametrize(
    ("kind", "kept"), [("booking.confirmed", True), ("webhook.test", False), ("", False)]
)
def test_has_event_page(kind: str, kept: bool) -> None:
    assert has_event_page(kind) is kept


@pytest.mark.parametrize(
    ("choice", "span"),
    [
        ("1m", dt.timedelta(minutes=1)),
        ("5m", dt.timedelta(minutes=5)),
        ("30m", dt.timedelta(minutes=30)),
        ("2h", dt.timedelta(hours=2)),
        ("6h", dt.timedelta(hours=6)),
        ("24h", dt.timedelta(days=1)),
    ],
)
def test_clock_choices(choice: str, span: dt.timedelta) -> None:
    assert choice in CLOCK_CHOICES
    assert clock_span(choice) == span


@pytest.mark.parametrize("choice", ["", "3h", "8d", "2H", " 2h", "0s", "1h30m"])
def test_other_clock_spans_are_refused_beside_the_field(choice: str) -> None:
    with pytest.raises(ClientError) as refused:
        clock_span(choice)
    assert (refused.value.status, refused.value.field) == (400, "by")


@pytest.mark.parametrize(
    ("page", "to"),
    [
        ("webhooks", "/sandbox/webhooks"),
        ("deliveries", "/sandbox/deliveries"),
        ("", "/sandbox/webhooks"),
        ("//evil.example", "/sandbox/webhooks"),
        ("keys", "/sandbox/webhooks"),
    ],
)
def test_clock_back(page: str, to: str) -> None:
    assert clock_back("sandbox", page) == to


@pytest.mark.parametrize(
    ("page", "query", "to"),
    [
        ("deliveries", "endpoint_id=we_1", "/sandbox/deliveries?endpoint_id=we_1"),
        (
            "deliveries",
            "endpoint_id=we_1&status=pending",
            "/sandbox/deliveries?endpoint_id=we_1&status=pending",
        ),
        (
            "deliveries",
            "event_kind=booking.confirmed&page=tok",
            "/sandbox/deliveries?event_kind=booking.confirmed",
        ),
        ("deliveries", "endpoint_id=&next=%2F%2Fevil.example", "/sandbox/deliveries"),
        ("webhooks", "endpoint_id=we_1", "/sandbox/webhooks"),  # the webhooks page has no filter
        ("deliveries", "since=2026-01-01T00%3A00", "/sandbox/deliveries?since=2026-01-01T00%3A00"),
    ],
)
def test_clock_back_keeps_the_logs_filter(page: str, query: str, to: str) -> None:
    assert clock_back("sandbox", page, query) == to
    if "?" in to:
        assert clock_back("sandbox", page, filter_query(dict(parse_qsl(to.split("?")[1])))) == to


@pytest.mark.parametrize(
    ("choice", "due", "notice"),
    [
        ("2h", 3, "Sandbox clock advanced by 2h: 3 deliveries due now"),
        ("1m", 1, "Sandbox clock advanced by 1m: 1 delivery due now"),
        ("24h", 0, "Sandbox clock advanced by 24h: 0 deliveries due now"),
    ],
)
def test_clock_notice(choice: str, due: int, notice: str) -> None:
    assert clock_notice(choice, due) == notice


@pytest.mark.parametrize(
    ("word", "number", "read_back", "keys_shown"),
    [
        ("", wpb.SIGNATURE_SCHEME_STRIPE, "stripe", False),  # a form without a choice: the default
        ("stripe", wpb.SIGNATURE_SCHEME_STRIPE, "stripe", False),
        ("standard", wpb.SIGNATURE_SCHEME_STANDARD, "standard", True),
        ("both", wpb.SIGNATURE_SCHEME_BOTH, "both", True),
    ],
)
def test_signature_schemes(word: str, number: int, read_back: str, keys_shown: bool) -> None:
    assert scheme_number(word) == number
    assert scheme_word(number) == read_back
    assert signs_ed25519(read_back) is keys_shown


@pytest.mark.parametrize("word", ["STANDARD", "v1a", "none", "unspecified", " stripe"])
def test_an_unknown_scheme_is_refused_beside_its_field(word: str) -> None:
    with pytest.raises(ClientError) as refused:
        scheme_number(word)
    assert refused.value.field == "signature_scheme"
    assert "stripe, standard, both" in refused.value.message


def test_an_endpoint_of_no_scheme_reads_as_the_default() -> None:
    assert scheme_word(wpb.SIGNATURE_SCHEME_UNSPECIFIED) == "stripe"


@pytest.mark.parametrize(
    ("word", "number", "read_back"),
    [
        ("", wpb.DELIVERY_ORDER_UNORDERED, "none"),  # a form without a choice: the default
        ("none", wpb.DELIVERY_ORDER_UNORDERED, "none"),
        ("perResource", wpb.DELIVERY_ORDER_PER_RESOURCE, "perResource"),
    ],
)
def test_delivery_orders(word: str, number: int, read_back: str) -> None:
    assert ordering_number(word) == number
    assert ordering_word(number) == read_back


@pytest.mark.parametrize("word", ["perresource", "fifo", "unordered", "PER_RESOURCE", " none"])
def test_an_unknown_ordering_is_refused_beside_its_field(word: str) -> None:
    with pytest.raises(ClientError) as refused:
        ordering_number(word)
    assert refused.value.field == "ordering"
    assert "none, perResource" in refused.value.message


def test_an_endpoint_of_no_ordering_reads_as_unordered() -> None:
    assert ordering_word(wpb.DELIVERY_ORDER_UNSPECIFIED) == "none"


@pytest.mark.parametrize(
    ("word", "number"),
    [("", wpb.PAYLOAD_MODE_FULL), ("full", wpb.PAYLOAD_MODE_FULL), ("thin", wpb.PAYLOAD_MODE_THIN)],
)
def test_payload_modes_read_back_and_blank_is_full(word: str, number: int) -> None:
    assert payload_number(word) == number
    assert payload_word(number) == (word or "full")
    assert payload_word(wpb.PAYLOAD_MODE_UNSPECIFIED) == "full"


@pytest.mark.parametrize("word", ["THIN", "slim", "unspecified", " full"])
def test_an_unknown_payload_mode_is_refused_beside_its_field(word: str) -> None:
    with pytest.raises(ClientError) as refused:
        payload_number(word)
    assert (refused.value.field, refused.value.message) == ("payload", "choose one of full, thin")


@pytest.mark.parametrize(
    ("count", "title", "notice"),
    [
        (0, "Nothing to recover", "0 deliveries queued (failed or held since T)."),
        (1, "Recover 1 delivery?", "1 delivery queued (failed or held since T)."),
        (7, "Recover 7 deliveries?", "7 deliveries queued (failed or held since T)."),
    ],
)
def test_recover_question_and_notice(count: int, title: str, notice: str) -> None:
    asked, explain = recover_question(count, "T")
    assert asked == title
    assert "since T" in explain
    assert recover_notice(count, "T") == notice


# -- filtered events (the event page) ------------------------------------------------------------------------
def _ts(second: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=second)


def _event() -> wpb.Event:
    envelope = json.dumps(
        {
            "id": "evt_1",
            "type": "booking.confirmed",
            "created": "2026-03-14T09:30:00.000Z",
            "data": {"product": "flights"},
        }
    )
    return wpb.Event(id="evt_1", type="booking.confirmed", created_at=_ts(100), envelope_json=envelope)


def _ep(eid: str, flt: str = '{"data":{"product":"hotels"}}', **kw: object) -> wpb.Endpoint:
    fields: dict[str, object] = {
        "events": ["booking.confirmed"],
        "created_at": _ts(50),
        "filter_updated_at": _ts(50),
    }
    return wpb.Endpoint(id=eid, filter_json=flt, **(fields | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("endpoint", "delivered", "expected"),
    [
        (_ep("we_a"), [], [("we_a", False)]),  # subscribed, made before, its filter says no: filtered
        (_ep("we_a", events=["*"]), [], [("we_a", False)]),
        (_ep("we_a", filter_updated_at=_ts(200)), [], [("we_a", True)]),  # filter changed since: said so
        (_ep("we_a", flt=""), [], []),  # no filter: never filtered
        (_ep("we_a", flt='{"data":{"product":"flights"}}'), [], []),  # its filter matches
        (_ep("we_a"), ["we_a"], []),  # it has a delivery
        (_ep("we_a", events=["booking.failed"]), [], []),  # not subscribed to the kind
        (_ep("we_a", created_at=_ts(150)), [], []),  # made after the event
    ],
)
def test_filtered_out(endpoint: wpb.Endpoint, delivered: list[str], expected: list[tuple[str, bool]]) -> None:
    got = filtered_out(_event(), [endpoint], delivered)
    assert [(ep.id, changed) for ep, changed in got] == expected


@pytest.mark.parametrize(
    ("text", "stored"),
    [("", ""), ("  ", ""), ('{"type": "booking.confirmed"}', '{"type":"booking.confirmed"}')],
)
def test_filter_json(text: str, stored: str) -> None:
    assert filter_json(text) == stored


@pytest.mark.parametrize(
    ("text", "words"), [("{", "not valid JSON"), ('{"data": {"a": {"$nope": 1}}}', "$nope")]
)
def test_a_bad_filter_is_refused_beside_its_field(text: str, words: str) -> None:
    with pytest.raises(ClientError) as caught:
        filter_json(text)
    assert caught.value.field == "filter" and words in caught.value.message

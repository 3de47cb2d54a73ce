"""The trace context (svckit.tracing): a valid W3C traceparent on every proxied request and delivery with
spans off as on, the partner's trace continued, and another account's trace never on an event's delivery."""

from __future__ import annotations

import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from svckit import tracing

PARTNER = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
TRACE = tracing.parse_traceparent


@pytest.fixture(autouse=True)
def _forget_events() -> None:
    tracing._events.clear()


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (PARTNER, ("a" * 32, "b" * 16, "01")),
        (
            "00-" + "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
            ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00"),
        ),
        ("01-" + "a" * 32 + "-" + "b" * 16 + "-01-later", ("a" * 32, "b" * 16, "01")),  # a later version
        ("00-" + "a" * 32 + "-" + "b" * 16 + "-01-x", None),  # version 00 is exactly 55 characters
        ("ff-" + "a" * 32 + "-" + "b" * 16 + "-01", None),  # the forbidden version
        ("00-" + "0" * 32 + "-" + "b" * 16 + "-01", None),  # all-zero trace id
        ("00-" + "a" * 32 + "-" + "0" * 16 + "-01", None),  # all-zero parent id
        ("00-" + "A" * 32 + "-" + "b" * 16 + "-01", None),  # upper-case hex
        ("00-" + "g" * 32 + "-" + "b" * 16 + "-01", None),
        ("00_" + "a" * 32 + "-" + "b" * 16 + "-01", None),
        ("00-" + "a" * 31 + "-" + "b" * 17 + "-01", None),
        ("", None),
        (None, None),
        ("00-" + "a" * 32 + "-" + "b" * 16 + "-01-" + "x" * 600, None),
    ],
)
def test_parse_traceparent(value: str | None, parsed: tuple[str, str, str] | None) -> None:
    assert tracing.parse_traceparent(value) == parsed


@pytest.mark.parametrize(
    ("state", "account"),
    [
        ("svc=acct_1", "acct_1"),
        ("other=x, svc=acct_AbC9 ,more=y", "acct_AbC9"),
        ("other=x", ""),
        ("svc=", ""),
        ("svc=acct 1", ""),
        ("svc=acct_1;drop", ""),
        ("svc=" + "a" * 65, ""),
        ("svc=acct_é", ""),
        ("", ""),
        (None, ""),
        ("svc=acct_1," + "x" * 600, ""),
    ],
)
def test_bound_account(state: str | None, account: str) -> None:
    assert tracing.bound_account(state) == account


def test_new_traceparent_continues_a_valid_parent_or_starts_a_trace() -> None:
    child = TRACE(tracing.new_traceparent(PARTNER))
    assert child is not None and child[0] == "a" * 32 and child[1] != "b" * 16 and child[2] == "01"
    fresh = {tracing.new_traceparent(bad) for bad in (None, "", "junk") for _ in range(3)}
    assert len(fresh) == 9 and all(TRACE(v) is not None and v.endswith("-00") for v in fresh)


def test_spans_off_the_trace_travels_in_a_context_variable() -> None:
    assert tracing.tracer is None
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    assert tracing.traced("/travel.auth.v1.AuthService/GetAccount", handler) is handler  # no gRPC cost
    assert tracing.span("a") is tracing.span("b")  # no carrier: one shared no-op
    assert tracing.traceparent() == "" and tracing.tracestate() == ""
    with tracing.span("edge", {tracing.TRACEPARENT: PARTNER}, kind="SERVER"):
        inside = TRACE(tracing.traceparent())
        assert inside is not None and inside[0] == "a" * 32 and inside[1] != "b" * 16
        assert tracing.tracestate() == ""
        tracing.bind("acct_1")
        assert tracing.tracestate() == "svc=acct_1"
        headers: dict[str, str] = {}
        tracing.inject_into(headers)
        assert headers == {tracing.TRACEPARENT: tracing.traceparent(), tracing.TRACESTATE: "svc=acct_1"}
    assert (tracing.traceparent(), tracing.tracestate()) == ("", "")  # undone with the span
    with tracing.span("edge", {}, kind="SERVER"):  # no traceparent sent: a new trace
        started = TRACE(tracing.traceparent())
        assert started is not None and started[0] != "a" * 32
    with tracing.span("hotels", {tracing.TRACEPARENT: "junk", tracing.TRACESTATE: "svc=acct_1"}):
        assert TRACE(tracing.traceparent()) is not None and tracing.tracestate() == ""  # junk: not bound


def metadata(parent: str, account: str) -> list[tuple[str, str]]:
    return [("x-request-id", "req_1"), (tracing.TRACEPARENT, parent), (tracing.TRACESTATE, f"svc={account}")]


def test_spans_off_a_delivery_continues_only_its_own_accounts_trace() -> None:
    tracing.remember_event("evt_mine", "acct_1", metadata(PARTNER, "acct_1"))
    tracing.remember_event("evt_theirs", "acct_2", metadata(PARTNER, "acct_1"))  # published for another
    tracing.remember_event("evt_unbound", "acct_1", [(tracing.TRACEPARENT, PARTNER)])
    tracing.remember_event("evt_bad", "acct_1", metadata("junk", "acct_1"))
    tracing.remember_event("evt_none", "acct_1")
    sent = {}
    for event in ("evt_mine", "evt_theirs", "evt_unbound", "evt_bad", "evt_none"):
        headers: dict[str, str] = {}
        assert tracing.start_delivery(event, headers) is None
        assert set(headers) == {tracing.TRACEPARENT}  # never our tracestate
        parsed = TRACE(headers[tracing.TRACEPARENT])
        assert parsed is not None
        sent[event] = parsed[0]
    assert sent["evt_mine"] == "a" * 32
    assert "a" * 32 not in {sent[e] for e in ("evt_theirs", "evt_unbound", "evt_bad", "evt_none")}
    # An event whose trace is not known here has its own, the same on every attempt (and in any process).
    again: dict[str, str] = {}
    tracing.start_delivery("evt_theirs", again)
    assert again[tracing.TRACEPARENT].split("-")[1] == sent["evt_theirs"]
    assert sent["evt_theirs"] == tracing.event_traceparent("evt_theirs").split("-")[1]
    # A span of its own under the event's (its flags: sampled), a new one on each attempt.
    assert again[tracing.TRACEPARENT].endswith("-01")
    assert again[tracing.TRACEPARENT].split("-")[2] not in tracing.event_traceparent("evt_theirs")


def test_spans_on_continue_the_callers_trace_and_its_own_accounts_events() -> None:
    exporter = InMemorySpanExporter()
    assert tracing.setup("test", exporter=exporter)
    try:
        handler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
        assert tracing.traced("/travel.webhooks.v1.WebhookService/PublishEvent", handler) is not handler
        carrier = {tracing.TRACEPARENT: PARTNER, tracing.TRACESTATE: "svc=acct_1"}
        with tracing.span("PublishEvent", carrier, "req_1", kind="SERVER"):
            assert tracing.tracestate() == "svc=acct_1"
            tracing.remember_event("evt_1", "acct_1")
            tracing.remember_event("evt_2", "acct_2")
            inner = tracing.traceparent()
        headers: dict[str, str] = {}
        tracing.end_delivery(tracing.start_delivery("evt_1", headers), 200)
        other: dict[str, str] = {}
        tracing.end_delivery(tracing.start_delivery("evt_2", other), 200)
    finally:
        tracing.shutdown()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["PublishEvent", "webhookd deliver", "webhookd deliver"]
    assert f"{spans[1].context.trace_id:032x}" == "a" * 32
    assert f"{spans[2].context.trace_id:032x}" == tracing.event_traceparent("evt_2").split("-")[1]
    assert [s.attributes["request.id"] for s in spans[:2] if s.attributes] == ["req_1", "req_1"]
    assert inner.split("-")[1] == headers[tracing.TRACEPARENT].split("-")[1] == "a" * 32
    assert set(headers) == set(other) == {tracing.TRACEPARENT}
    assert tracing.tracer is None


def test_a_grpc_call_inside_a_received_request_carries_its_trace_and_account() -> None:
    from svckit.clients.interceptors import with_request_id

    details = grpc.aio.ClientCallDetails(
        "/travel.webhooks.v1.WebhookService/PublishEvent", 5, None, None, None
    )
    carrier = {tracing.TRACEPARENT: PARTNER, tracing.TRACESTATE: "svc=acct_1"}  # as the edge sends them
    with tracing.span("hotels GET /v1/hotels/search", carrier, kind="SERVER"):
        sent = dict(with_request_id(details).metadata or ())
        assert sent[tracing.TRACEPARENT] == tracing.traceparent()
    assert TRACE(sent[tracing.TRACEPARENT])[0] == "a" * 32  # type: ignore[index]
    assert sent[tracing.TRACESTATE] == "svc=acct_1"
    assert with_request_id(details).metadata is None  # outside a request: nothing added


def test_the_edges_continue_trace_sets_and_resets_the_context() -> None:
    token = tracing.continue_trace(PARTNER)
    try:
        tracing.bind("acct_9")
        assert TRACE(tracing.traceparent())[0] == "a" * 32  # type: ignore[index]
        assert tracing.tracestate() == "svc=acct_9"
    finally:
        tracing.end_trace(token)
    assert (tracing.traceparent(), tracing.tracestate()) == ("", "")
    token = tracing.continue_trace("00-" + "a" * 32 + "-" + "0" * 16 + "-01")  # invalid: a new trace
    try:
        assert TRACE(tracing.traceparent())[0] != "a" * 32  # type: ignore[index]
    finally:
        tracing.end_trace(token)

"""The event catalog (svckit.catalog): every schema is a valid draft 2020-12 schema with camelCase fields,
every example validates, and every event the sandbox can publish (samples of both modes, trigger
warnings, the simulator's lifecycle) validates against its kind's schema with the catalog's state. The
live publishers' data (authsvc, webhookd's test send) are built by the same functions; the integration
test (tests/integration/test_event_catalog_live.py) validates what they really publish."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from edge import samples
from edge.authcache import Caller
from edge.environments import Environment
from edge.gate import Ctx
from edge.publisher import Publisher
from edge.routetable import DEFAULT_ROUTES, RouteTable
from edge.simulator import Simulator
from edge.triggers import TRIGGERS
from svckit import catalog
from svckit.catalog import EVENT_KINDS, KINDS, STATES, TEST_KIND
from svckit.quota import THRESHOLD_PERCENT, threshold_of
from tests.support import script

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SPEC_KINDS = {
    "booking.confirmed",
    "booking.failed",
    "booking.cancelled",
    "booking.modified",
    "payment.succeeded",
    "payment.failed",
    "payment.refunded",
    "esim.provisioned",
    "esim.usage_threshold",
    "ledger.low_balance",
    "search_quota.threshold",
    "settlement.invoice_issued",
    "settlement.payment_failed",
    "apikey.revoked",
    "apikey.leaked",
}
OPERATIONAL_KINDS = {
    "endpoint.failing",
    "endpoint.disabled",
    "endpoint.recovered",
    "delivery.exhausted",
    "account.look_to_book_exceeded",
    "account.anomaly",
}
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
ALL_KINDS = (*EVENT_KINDS, TEST_KIND.kind)
NOW = dt.datetime(2026, 1, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC)


def validate(kind: str, state: str, data: Mapping[str, Any]) -> None:
    """Fails unless ``state`` is one of the kind's states and ``data`` fits its schema (formats checked)."""
    assert state in catalog.kind_of(kind).states, (kind, state)
    validator = Draft202012Validator(catalog.schema(kind), format_checker=FormatChecker())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]
    assert not errors, (kind, dict(data), errors)


def property_names(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            yield name
            yield from property_names(sub)
        for key in ("oneOf", "anyOf", "allOf"):
            for sub in schema.get(key, []):
                yield from property_names(sub)
        for name in schema.get("required", []):
            yield name


def keys_of(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from keys_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from keys_of(v)


# -- the catalog itself ----------------------------------------------------------------------------------
def test_the_catalog_is_the_closed_list_of_kinds() -> None:
    from svckit.events import EVENT_KINDS as KINDS_OF_EVENTS
    from svckit.events import MODE_ONLY

    # The spec's kinds and webhookd's operational ones (endpoint.*, delivery.exhausted) are there, each
    # once; a kind added to the catalog needs no change here (docs/architecture.md "Two exercises").
    assert KINDS_OF_EVENTS == EVENT_KINDS and len(EVENT_KINDS) == len(set(EVENT_KINDS))
    assert set(EVENT_KINDS) >= SPEC_KINDS | OPERATIONAL_KINDS
    assert TEST_KIND.kind not in EVENT_KINDS and not TEST_KIND.subscribable
    assert {k: m for k, m in MODE_ONLY.items() if k in SPEC_KINDS} == {
        "payment.succeeded": "B",
        "payment.failed": "B",
        "payment.refunded": "B",
        "ledger.low_balance": "A",
    }
    assert set(STATES) == set(EVENT_KINDS) and set(samples.STATES) == set(EVENT_KINDS)
    assert STATES["search_quota.threshold"] == "threshold_reached"
    assert STATES["ledger.low_balance"] == "low_balance"
    assert STATES["apikey.revoked"] == "revoked"


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_schema_is_valid_closed_and_camel_case(kind: str) -> None:
    entry = catalog.kind_of(kind)
    schema = catalog.schema(kind)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False and schema["required"]
    names = set(property_names(schema))
    assert names and all(CAMEL.match(n) for n in names), sorted(n for n in names if not CAMEL.match(n))
    assert set(schema["required"]) <= set(schema["properties"])
    assert all("description" in p for p in schema["properties"].values())
    assert entry.description and entry.states and all(re.fullmatch(r"[a-z_]+", s) for s in entry.states)
    Draft202012Validator.check_schema(catalog.envelope_schema(kind))


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_sample_derived_from_the_schema_validates(kind: str) -> None:
    """A kind without a sample builder of its own gets its sample from its schema (the catalog's fallback);
    that sample validates for every kind's schema, so one built from a new entry's does too."""
    from svckit.eventschemas import sample_of

    validate(kind, catalog.kind_of(kind).state, sample_of(catalog.schema(kind)))


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_example_validates(kind: str) -> None:
    example = catalog.example(kind)
    validate(kind, catalog.kind_of(kind).state, example)
    assert all(CAMEL.match(k) for k in keys_of(example))


def test_catalog_is_json_data_of_every_kind() -> None:
    entries = json.loads(json.dumps(catalog.catalog()))
    assert [e["kind"] for e in entries] == [*EVENT_KINDS, TEST_KIND.kind]
    assert [e["kind"] for e in catalog.catalog(include_test=False)] == list(EVENT_KINDS)
    for e in entries:
        assert set(e) == {
            "kind",
            "description",
            "states",
            "mode",
            "subscribable",
            "publishers",
            "sandbox",
            "publisher",
            "reader",
            "readers",
            "schema",
            "example",
            "references",
            "thinSchema",
        }
        assert e["schema"] == catalog.schema(e["kind"]) and e["example"] == catalog.example(e["kind"])
        assert e["mode"] == (catalog.MODE_ONLY.get(e["kind"]))
    # schema() hands out copies: nobody can change the catalog through one.
    catalog.schema("apikey.revoked")["properties"].clear()
    assert catalog.schema("apikey.revoked")["properties"]


# -- who publishes, who reads: data of the catalog -----------------------------------------------------------
def admitted_products(kind: str) -> set[str]:
    """The products a kind's schema lets an event be about (its subjects: a booking's or an order's)."""
    prop = catalog.schema(kind)["properties"].get("product")
    if prop is None:
        return set()
    return {prop["const"]} if "const" in prop else set(prop["enum"])


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_publishers_are_identities_and_products_follow_the_schema(kind: str) -> None:
    entry = catalog.kind_of(kind)
    assert entry.publishers and len(set(entry.publishers)) == len(entry.publishers)
    for identity in entry.publishers:
        assert identity in {"authsvc", "webhookd", "billing"} or re.fullmatch(r"product:[a-z]+", identity)
    # A kind whose schema is about a product is published by exactly the services of the products it
    # admits (booking.failed and payment.* cover eSIM orders, so product:esim publishes them too), and
    # a kind about no product by no product service.
    assert set(entry.products) == admitted_products(kind)
    assert entry.publisher and all(f"`{s}`" in entry.publisher for s in entry.publishers)
    assert entry.sandbox is entry.subscribable  # the sandbox sends a sample of every published kind


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_readers_are_the_stream_rule(kind: str) -> None:
    """decisions: booking and payment events, the product's ``<resource>:read``; eSIM events
    ``esim:read``; the rest ``account:read``."""
    from edge.streamfilter import scopes_for_event
    from svckit.scopes import ALL_SCOPES

    entry = catalog.kind_of(kind)
    assert set(entry.readers) <= set(ALL_SCOPES)
    family = kind.split(".", 1)[0]
    example = catalog.example(kind)
    if family in ("booking", "payment"):
        assert entry.reader == catalog.BY_PRODUCT
        assert entry.readers == tuple(f"{p}:read" for p in entry.products)
        for product in entry.products:
            assert entry.read_scopes({**example, "product": product}) == (f"{product}:read",)
    elif family == "esim":
        assert entry.readers == ("esim:read",)
    else:
        assert entry.readers == ("account:read",)
    # The stream reads the catalog: a new kind is readable by what its entry says, nothing else.
    streamed = entry.read_scopes(example) if entry.subscribable else ()  # webhook.test is never streamed
    assert scopes_for_event(kind, example) == streamed
    assert scopes_for_event("nosuch.kind", example) == ()


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_a_publish_without_state_gets_the_catalogs_and_validates(kind: str) -> None:
    """What webhookd stores for a publish that gives no state: the kind's usual state, an envelope its
    envelope schema accepts; every other state of the kind too, and no state outside them."""
    from svckit.eventcheck import event_problem, resolve_state
    from webhookd._events import Environment, build_envelope

    data = catalog.example(kind)
    assert resolve_state(kind, "") == catalog.kind_of(kind).state
    validator = Draft202012Validator(catalog.envelope_schema(kind), format_checker=FormatChecker())
    for state in ("", *catalog.kind_of(kind).states):
        assert event_problem(kind, state, data) is None
        for env in Environment:
            envelope = build_envelope(
                event_id="evt_4bq2LrD2JrC8H1nQmC1x8ZyA",
                kind=kind,
                created=NOW,
                environment=env,
                account_id="acct_7Hq3ZkM9pT2wX5rB8nC1dF4g",
                state=resolve_state(kind, state),
                data=data,
            )
            assert not list(validator.iter_errors(json.loads(envelope)))
    problem = event_problem(kind, "weird", data)
    assert problem is not None and problem.field == "state"
    assert not Draft202012Validator(catalog.envelope_schema(kind)).is_valid(
        catalog.example_envelope(kind) | {"state": "weird"}
    )


def test_schemas_refuse_the_old_shapes() -> None:
    old_threshold = {
        "date": "2026-03-14",
        "searches_used": 800,
        "daily_search_allowance": 1000,
        "remaining": 200,
        "threshold_percent": 80,
    }
    old_revoked = {
        "key_id": "key_x",
        "hint": "h",
        "name": "n",
        "revoked_at": "2026-03-14T09:30:00+00:00",
        "revoked_by": "a",
        "reason": "",
    }
    for kind, data in (("search_quota.threshold", old_threshold), ("apikey.revoked", old_revoked)):
        assert not Draft202012Validator(catalog.schema(kind)).is_valid(data)
    near = catalog.quota_threshold(1000, "2026-03-14") | {"thresholdPercent": 90}
    assert not Draft202012Validator(catalog.schema("search_quota.threshold")).is_valid(near)
    both = catalog.example("booking.failed") | {"order": "ord_x", "plan": "plan_x"}
    assert not Draft202012Validator(catalog.schema("booking.failed")).is_valid(both)


def test_svckit_events_stays_standard_library_only() -> None:
    code = "import svckit.events, json, sys; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    heavy = ("grpc", "sanic", "sqlalchemy", "jsonschema", "google", "edge", "authsvc", "webhookd")
    assert [m for m in loaded if m.split(".")[0] in heavy] == []


# -- the sandbox: samples, trigger warnings, the simulator ---------------------------------------------------
@pytest.mark.parametrize("mode", ["A", "B"])
@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_every_sample_of_both_modes_validates(kind: str, mode: str) -> None:
    for now in (
        NOW,
        catalog.EXAMPLE_NOW,
        dt.datetime(2026, 3, 1, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=5))),
    ):
        for allowance in (0, 1, 2, 7, 1000, 10_000):
            state, data = samples.sample(kind, mode, now, allowance)
            assert state == STATES[kind] == KINDS[kind].state
            validate(kind, state, data)


@pytest.mark.parametrize("allowance", [1, 2, 3, 10, 999, 1000, 10_000])
def test_quota_sample_equals_what_authsvc_sends_at_the_threshold(allowance: int) -> None:
    day = dt.date(2026, 3, 14)
    live = catalog.quota_threshold(allowance, day.isoformat(), threshold_of(allowance))
    assert samples.quota_threshold(allowance, day) == live
    assert live["thresholdPercent"] == THRESHOLD_PERCENT == 80
    assert (
        samples.sample("search_quota.threshold", "A", dt.datetime(2026, 3, 14, 12, tzinfo=dt.UTC), allowance)[
            1
        ]
        == live
    )


@pytest.mark.parametrize("name", [n for n, t in TRIGGERS.items() if t.warn_event])
def test_trigger_warnings_validate(name: str) -> None:
    # What edge.gate publishes before a trigger's error: the same functions, the catalog's state.
    kind = TRIGGERS[name].warn_event
    for allowance in (0, 1, 5, 10_000):
        data = (
            samples.quota_threshold(allowance, dt.date(2026, 3, 14))
            if kind == "search_quota.threshold"
            else samples.low_balance()
        )
        validate(kind, samples.STATES[kind], data)


class RecordingPublisher(Publisher):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def publish(  # type: ignore[override]
        self,
        account_id: str,
        environment: Environment,
        kind: str,
        state: str,
        data: Mapping[str, Any],
        *,
        key: str = "",
        request_id: str = "",
    ) -> None:
        self.events.append((kind, state, json.loads(json.dumps(dict(data)))))


def _ctx(
    mode: str, n: int, body: dict[str, Any] | None = None, trigger: str = "", ref: str = "cust-9"
) -> Ctx:
    caller = Caller(
        key_id="key_x",
        account_id=f"acct_{mode}",
        environment="sandbox",
        scopes=("*",),
        key_status="active",
        account_mode=mode,
        daily_search_allowance=100,
    )
    return Ctx(
        request_id=f"req_{n}",
        environment=Environment.SANDBOX,
        caller=caller,
        source="192.0.2.1",
        body=body,
        customer_ref=ref,
        trigger=TRIGGERS[trigger] if trigger else None,
    )


async def test_simulator_lifecycle_events_validate() -> None:
    publisher = RecordingPublisher()
    sim = Simulator(publisher, confirm_seconds=0)
    table = RouteTable.from_json(DEFAULT_ROUTES)
    n = 0

    async def call(method: str, path: str, ctx: Ctx) -> dict[str, Any]:
        match = table.match(method, path)
        assert match is not None, path
        route, params = match
        request = SimpleNamespace(headers={"idempotency-key": f"idem-{ctx.request_id}"}, args={})
        resp = await sim.answer(route, request, ctx, params)  # type: ignore[arg-type]
        assert resp.status in (200, 202), resp.body
        body: dict[str, Any] = json.loads(resp.body or b"{}")
        return body

    for mode in ("A", "B"):
        triggers = ["", "booking_failed", *(["payment_failed"] if mode == "B" else [])]
        for trigger in triggers:
            for product, body in (
                ("hotels", {"offer": "off_hotels_2"}),
                ("flights", {}),
                ("esim", {"plan": "plan_world_3gb"}),
            ):
                n += 1
                ref = "" if n % 2 else "cust-9"  # with and without X-Partner-Customer-Ref
                coll = "orders" if product == "esim" else "bookings"
                created = await call("POST", f"/v1/{product}/{coll}", _ctx(mode, n, body, trigger, ref))
                await sim.drain(5)
                if product != "esim" and not trigger:
                    sid = created["id"]
                    n += 1
                    await call("POST", f"/v1/{product}/bookings/{sid}/modify", _ctx(mode, n, {"guests": 2}))
                    n += 1
                    await call("POST", f"/v1/{product}/bookings/{sid}/cancel", _ctx(mode, n))
        # An id this process does not know reads as confirmed sample data, and can be cancelled.
        n += 1
        await call("POST", "/v1/hotels/bookings/bk_test_0123456789ab/cancel", _ctx(mode, n))
    published = {kind for kind, _, _ in publisher.events}
    assert published == {
        "booking.confirmed",
        "booking.failed",
        "booking.modified",
        "booking.cancelled",
        "payment.succeeded",
        "payment.failed",
        "payment.refunded",
        "esim.provisioned",
    }
    for kind, state, data in publisher.events:
        validate(kind, state, data)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_example_envelope_validates(kind: str) -> None:
    envelope = catalog.example_envelope(kind)
    errors = list(
        Draft202012Validator(catalog.envelope_schema(kind), format_checker=FormatChecker()).iter_errors(
            envelope
        )
    )
    assert not errors, errors


def test_webhook_test_data_validates() -> None:
    validate("webhook.test", "test", catalog.webhook_test("we_4bq2LrD2JrC8H1nQmC1x8ZyA"))


def test_apikey_revoked_timestamp_is_rfc3339_utc_milliseconds() -> None:
    when = dt.datetime(2026, 3, 14, 10, 30, 0, 123_456, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    data = catalog.apikey_revoked("key_a", "svc_live_...abcd", "n", when, "", "")
    assert data["revokedAt"] == "2026-03-14T09:30:00.123Z"
    validate("apikey.revoked", "revoked", data)


# -- docs/events.md ----------------------------------------------------------------------------------------
def test_docs_events_md_is_generated_from_the_catalog() -> None:
    expected = script("gen_event_docs").render()
    actual = (ROOT / "docs" / "events.md").read_text()
    assert actual == expected, "docs/events.md is stale: run `python scripts/gen_event_docs.py`"

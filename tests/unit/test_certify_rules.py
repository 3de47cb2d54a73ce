"""The certification checks, by table: each check's pass and fail cases, the fault schedule, and the six
broken clients of the issue each failing exactly their one check."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from authsvc._certify_rules import (
    CHECKS,
    Delivery,
    Probe,
    RunRequest,
    booking_flow,
    evaluate,
    honours_retry_after,
    idempotency_key_present,
    passed,
    retry_reuses_key,
    webhook_kinds,
)
from svckit.certification import UNAUTHORIZED_SPAN, Fault, ProbeKind, claim_fault, fault_for

T0 = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)


def at(seconds: float) -> dt.datetime:
    return T0 + seconds * SEC


def req(
    n: int, method: str, path: str, status: int = 200, seconds: float | None = None, **kw: object
) -> RunRequest:
    return RunRequest(f"req_{n}", method, path, status, at(n if seconds is None else seconds), **kw)  # type: ignore[arg-type]


def post(n: int, key: str | None = None, body: str = "b", **kw: object) -> RunRequest:
    """A booking POST; ``key`` None: a key of its own, "": none."""
    fields: dict[str, object] = {
        "status": 201,
        "idempotency_key": f"k{n}" if key is None else key,
        "body": body,
    }
    return req(n, "POST", "/v1/hotels/bookings", **(fields | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("nth", "every", "fault"),
    [
        (1, 7, None),
        (6, 7, None),
        (7, 7, Fault.UNAVAILABLE),
        (14, 7, Fault.RATE_LIMITED),
        (21, 7, Fault.TIMEOUT),
        (28, 7, Fault.UNAUTHORIZED),
        (35, 7, Fault.UNAVAILABLE),
        (29, 7, None),
        (2, 2, Fault.UNAVAILABLE),
        (0, 7, None),
        (-7, 7, None),
        (7, 0, None),
    ],
)
def test_fault_schedule(nth: int, every: int, fault: Fault | None) -> None:
    assert fault_for(nth, every) is fault


@pytest.mark.parametrize(
    ("name", "nth", "spell", "now", "fault", "after"),
    [
        ("no spell, no fault", 1, None, 0, None, None),
        ("no spell, scheduled 503", 2, None, 0, Fault.UNAVAILABLE, None),
        ("scheduled 401 starts a spell", 8, None, 0, Fault.UNAUTHORIZED, 10),
        ("inside the spell every POST is 401", 9, 10, 5, Fault.UNAUTHORIZED, 10),
        ("the spell's end is outside it", 9, 10, 10, None, 10),
        ("after the spell the schedule again", 10, 10, 11, Fault.UNAVAILABLE, 10),
    ],
)
def test_claim_fault(
    name: str, nth: int, spell: float | None, now: float, fault: Fault | None, after: float | None
) -> None:
    spell_until = None if spell is None else at(spell)
    got = claim_fault(nth, 2, at(now), spell_until)
    assert got == (fault, None if after is None else at(after))
    assert UNAUTHORIZED_SPAN == dt.timedelta(seconds=10)


FAULT_503: dict[str, Any] = {"status": 503, "fault": Fault.UNAVAILABLE}
FAULT_504: dict[str, Any] = {"status": 504, "fault": Fault.TIMEOUT}

RETRY_CASES = [
    # (name, requests, passed)
    ("no fault given", [post(1)], False),
    ("same key and body", [post(1, "a", **FAULT_503), post(2, "a")], True),
    ("504 then same key and body", [post(1, "a", **FAULT_504), post(2, "a")], True),
    ("not retried: another booking", [post(1, "a", body="x", **FAULT_503), post(2, "b", body="y")], True),
    ("new key, same body", [post(1, "a", **FAULT_503), post(2, "b")], False),
    ("same key, changed body", [post(1, "a", body="x", **FAULT_503), post(2, "a", body="y")], False),
    (
        "retry without a key is the other check's",
        [post(1, "a", **FAULT_503), post(2, "")],
        True,
    ),
    (
        "retry to another path is not a retry",
        [post(1, "a", **FAULT_503), req(2, "POST", "/v1/flights/bookings", idempotency_key="b", body="b")],
        True,
    ),
]


@pytest.mark.parametrize(("name", "requests", "ok"), RETRY_CASES, ids=[c[0] for c in RETRY_CASES])
def test_retry_reuses_key(name: str, requests: list[RunRequest], ok: bool) -> None:
    result = retry_reuses_key(requests)
    assert result.passed is ok, result.detail
    if not ok and requests[0].fault:
        assert "req_1" in result.evidence


def test_retry_without_key_fails_presence() -> None:
    requests = [post(1, "a", **FAULT_503), post(2, "")]
    result = idempotency_key_present(requests)
    assert not result.passed and result.evidence == ("req_2",)
    assert idempotency_key_present([post(1), post(2)]).passed
    assert not idempotency_key_present([req(1, "GET", "/v1/hotels/search")]).passed


LIMIT: dict[str, Any] = {"status": 429, "fault": Fault.RATE_LIMITED, "retry_after": 2}

RETRY_AFTER_CASES = [
    ("no 429", [post(1), post(2)], False),
    ("waited exactly", [post(1, **LIMIT), post(3)], True),
    ("waited longer", [post(1, **LIMIT), post(9)], True),
    ("came back at once", [post(1, **LIMIT), req(2, "GET", "/v1/hotels/search", seconds=1.5)], False),
    (
        "a probe GET does not count",
        [post(1, **LIMIT), req(2, "GET", "/v1/hotels/search", seconds=1.2, probe=True), post(4)],
        True,
    ),
    ("429 last in the run", [post(1), post(2, **LIMIT)], True),
]


@pytest.mark.parametrize(("name", "requests", "ok"), RETRY_AFTER_CASES, ids=[c[0] for c in RETRY_AFTER_CASES])
def test_honours_retry_after(name: str, requests: list[RunRequest], ok: bool) -> None:
    assert honours_retry_after(requests).passed is ok


def unauthorized(n: int, seconds: float) -> RunRequest:
    return req(n, "GET", "/v1/hotels/search", 401, seconds, error_type="invalid_api_key")


def quota(n: int, seconds: float, error_type: str = "search_quota_exhausted") -> RunRequest:
    return req(n, "GET", "/v1/hotels/search", 402, seconds, error_type=error_type)


LOOP_CASES = [
    # (name, requests, no_unauthorized_loop, no_quota_loop)
    ("none", [post(1)], True, True),
    ("one 401, backed off", [unauthorized(1, 0), unauthorized(2, 30)], True, True),
    ("four 401s in a minute", [unauthorized(i, i) for i in range(4)], True, True),
    ("five 401s in a minute", [unauthorized(i, i) for i in range(5)], False, True),
    ("five 401s over five minutes", [unauthorized(i, 61 * i) for i in range(5)], True, True),
    ("five 402 quota in a minute", [quota(i, i) for i in range(5)], True, False),
    ("five 402 of another type", [quota(i, i, "payment_required") for i in range(5)], True, True),
]


@pytest.mark.parametrize(("name", "requests", "no401", "no402"), LOOP_CASES, ids=[c[0] for c in LOOP_CASES])
def test_no_loops(name: str, requests: list[RunRequest], no401: bool, no402: bool) -> None:
    results = {r.name: r for r in evaluate(requests, [], [], [])}
    assert results["no_unauthorized_loop"].passed is no401
    assert results["no_quota_loop"].passed is no402
    if not no401:
        assert results["no_unauthorized_loop"].evidence[0] == "req_0"


def flow(product: str = "hotels", cancel_status: int = 200) -> list[RunRequest]:
    return [
        req(1, "GET", f"/v1/{product}/search"),
        req(2, "GET", f"/v1/{product}/offers/off_1"),
        req(3, "POST", f"/v1/{product}/bookings", 201, idempotency_key="a", body="b"),
        req(4, "POST", f"/v1/{product}/bookings/bk_1/cancel", cancel_status, idempotency_key="c", body="d"),
    ]


@pytest.mark.parametrize(
    ("name", "requests", "ok"),
    [
        ("hotels", flow(), True),
        ("flights", flow("flights"), True),
        ("cancel failed", flow(cancel_status=409), False),
        ("mixed products", flow()[:2] + flow("flights")[2:], False),
        ("esim is not a booking flow", flow("esim"), False),
        ("nothing", [], False),
    ],
)
def test_booking_flow(name: str, requests: list[RunRequest], ok: bool) -> None:
    result = booking_flow(requests)
    assert result.passed is ok
    if ok:
        assert result.evidence == ("req_1", "req_2", "req_3", "req_4")


@pytest.mark.parametrize(
    ("name", "deliveries", "subscribed", "ok"),
    [
        (
            "each kind 2xx",
            [Delivery("d1", "booking.confirmed", 200), Delivery("d2", "booking.cancelled", 204)],
            ["booking.confirmed", "booking.cancelled"],
            True,
        ),
        (
            "one kind only 500",
            [Delivery("d1", "booking.confirmed", 200), Delivery("d2", "booking.cancelled", 500)],
            ["booking.confirmed", "booking.cancelled"],
            False,
        ),
        (
            "a kind never sent",
            [Delivery("d1", "booking.confirmed", 200)],
            ["booking.confirmed", "booking.cancelled"],
            False,
        ),
        (
            "500 then 200",
            [Delivery("d1", "booking.confirmed", 500), Delivery("d2", "booking.confirmed", 200)],
            ["booking.confirmed"],
            True,
        ),
        ("no subscription", [], [], False),
    ],
)
def test_webhook_kinds(name: str, deliveries: list[Delivery], subscribed: list[str], ok: bool) -> None:
    assert webhook_kinds(deliveries, subscribed).passed is ok


def probes(
    valid: int = 200, wrong: int = 401, stale: int = 400, duplicate: int = 200, latency: float = 0.1
) -> list[Probe]:
    out = []
    for scheme in ("stripe", "standard"):
        out += [
            Probe(f"p_v_{scheme}", ProbeKind.VALID, scheme, valid, latency * SEC),
            Probe(f"p_w_{scheme}", ProbeKind.WRONG_SIGNATURE, scheme, wrong),
            Probe(f"p_s_{scheme}", ProbeKind.STALE_TIMESTAMP, scheme, stale),
            Probe(f"p_d_{scheme}", ProbeKind.DUPLICATE, scheme, duplicate),
        ]
    return out


PROBE_CASES = [
    # (name, probes, the checks that fail)
    ("a good receiver", probes(), set()),
    ("refuses valid", probes(valid=401), {"receiver_accepts_valid"}),
    ("valid too slowly", probes(latency=10.5), {"receiver_accepts_valid"}),
    ("valid at the deadline", probes(latency=10), set()),
    ("accepts wrong signature", probes(wrong=200), {"receiver_refuses_wrong_signature"}),
    ("wrong signature 500", probes(wrong=500), {"receiver_refuses_wrong_signature"}),
    ("accepts stale", probes(stale=204), {"receiver_refuses_stale"}),
    ("stale unanswered", probes(stale=0), {"receiver_refuses_stale"}),
    ("duplicate refused", probes(duplicate=409), {"receiver_tolerates_duplicate"}),
    (
        "one scheme only accepts wrong signature",
        [p if p.delivery_id != "p_w_standard" else dataclasses.replace(p, status=200) for p in probes()],
        {"receiver_refuses_wrong_signature"},
    ),
    (
        "no probes at all",
        [],
        {
            "receiver_accepts_valid",
            "receiver_refuses_wrong_signature",
            "receiver_refuses_stale",
            "receiver_tolerates_duplicate",
        },
    ),
]


@pytest.mark.parametrize(("name", "given", "failing"), PROBE_CASES, ids=[c[0] for c in PROBE_CASES])
def test_receiver_checks(name: str, given: list[Probe], failing: set[str]) -> None:
    results = evaluate(good_requests(), given, GOOD_DELIVERIES, SUBSCRIBED)
    assert {r.name for r in results if not r.passed} == failing


# A whole run of a good client: the flow, one 503 retried with the same key and body, one 429 waited out.
SUBSCRIBED = ["booking.confirmed"]
GOOD_DELIVERIES = [Delivery("d1", "booking.confirmed", 200)]


def good_requests() -> list[RunRequest]:
    return [
        *flow(),
        post(10, "r", body="rb", **FAULT_503),
        post(11, "r", body="rb"),
        post(12, "s", **LIMIT),
        post(15, "t"),
    ]


def test_a_good_run_passes_every_check() -> None:
    results = evaluate(good_requests(), probes(), GOOD_DELIVERIES, SUBSCRIBED)
    assert [r.name for r in results] == list(CHECKS)
    assert passed(results), [r for r in results if not r.passed]


def broken(variant: str) -> tuple[list[RunRequest], list[Probe]]:
    requests, given = good_requests(), probes()
    if variant == "no key on retry":
        requests[5] = dataclasses.replace(requests[5], idempotency_key="")
    elif variant == "new key on retry":
        requests[5] = dataclasses.replace(requests[5], idempotency_key="r2")
    elif variant == "ignores Retry-After":
        requests[7] = dataclasses.replace(requests[7], received_at=at(12.5))
    elif variant == "accepts a wrong signature":
        given = probes(wrong=200)
    elif variant == "accepts a stale timestamp":
        given = probes(stale=200)
    elif variant == "retries a 401 in a loop":
        requests += [unauthorized(20 + i, 20 + i / 10) for i in range(10)]
    return requests, given


@pytest.mark.parametrize(
    ("variant", "check"),
    [
        ("no key on retry", "idempotency_key_present"),
        ("new key on retry", "retry_reuses_key"),
        ("ignores Retry-After", "honours_retry_after"),
        ("accepts a wrong signature", "receiver_refuses_wrong_signature"),
        ("accepts a stale timestamp", "receiver_refuses_stale"),
        ("retries a 401 in a loop", "no_unauthorized_loop"),
    ],
)
def test_each_broken_client_fails_exactly_its_check(variant: str, check: str) -> None:
    requests, given = broken(variant)
    results = evaluate(requests, given, GOOD_DELIVERIES, SUBSCRIBED)
    assert [r.name for r in results if not r.passed] == [check]
    assert all(r.evidence for r in results if not r.passed)

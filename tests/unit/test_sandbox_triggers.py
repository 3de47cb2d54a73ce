"""The sandbox trigger decision, by table: every row of decisions.md "Sandbox", plus the refusals."""

from __future__ import annotations

import pytest

from edge.environments import Environment
from edge.triggers import NAMES, RouteKind, decide

LIVE, SANDBOX = Environment.LIVE, Environment.SANDBOX
S, C, ANY = RouteKind.SEARCH, RouteKind.CREATE, RouteKind.OTHER

CASES = [
    # (name, header, environment, route kind, account mode, error type, warning event, failure events)
    ("no header", None, SANDBOX, ANY, "A", "", "", ()),
    ("empty header", "  ", SANDBOX, C, "A", "", "", ()),
    ("no header on live", None, LIVE, C, "A", "", "", ()),
    ("any trigger on live", "rate_limited", LIVE, ANY, "A", "invalid_request", "", ()),
    ("unknown name on live is still the live refusal", "nope", LIVE, ANY, "A", "invalid_request", "", ()),
    ("unknown name", "booking_failure", SANDBOX, C, "A", "invalid_request", "", ()),
    ("names are case-sensitive", "RATE_LIMITED", SANDBOX, ANY, "A", "invalid_request", "", ()),
    ("rate_limited anywhere", "rate_limited", SANDBOX, ANY, "A", "rate_limited", "", ()),
    ("rate_limited on search", "rate_limited", SANDBOX, S, "B", "rate_limited", "", ()),
    ("service_unavailable anywhere", "service_unavailable", SANDBOX, C, "A", "service_unavailable", "", ()),
    (
        "quota on search",
        "search_quota_exhausted",
        SANDBOX,
        S,
        "A",
        "search_quota_exhausted",
        "search_quota.threshold",
        (),
    ),
    ("quota on creation", "search_quota_exhausted", SANDBOX, C, "A", "invalid_request", "", ()),
    ("quota elsewhere", "search_quota_exhausted", SANDBOX, ANY, "B", "invalid_request", "", ()),
    (
        "credit on creation, mode A",
        "credit_exhausted",
        SANDBOX,
        C,
        "A",
        "credit_exhausted",
        "ledger.low_balance",
        (),
    ),
    ("credit on creation, mode B", "credit_exhausted", SANDBOX, C, "B", "invalid_request", "", ()),
    ("credit on search", "credit_exhausted", SANDBOX, S, "A", "invalid_request", "", ()),
    ("booking_failed on creation, A", "booking_failed", SANDBOX, C, "A", "", "", ("booking.failed",)),
    ("booking_failed on creation, B", "booking_failed", SANDBOX, C, "B", "", "", ("booking.failed",)),
    ("booking_failed elsewhere", "booking_failed", SANDBOX, ANY, "A", "invalid_request", "", ()),
    (
        "payment_failed on creation, B",
        "payment_failed",
        SANDBOX,
        C,
        "B",
        "",
        "",
        ("payment.failed", "booking.failed"),
    ),
    ("payment_failed, mode A", "payment_failed", SANDBOX, C, "A", "invalid_request", "", ()),
    ("payment_failed on search", "payment_failed", SANDBOX, S, "B", "invalid_request", "", ()),
    ("surrounding spaces ignored", " rate_limited ", SANDBOX, ANY, "A", "rate_limited", "", ()),
]


@pytest.mark.parametrize(
    ("name", "header", "env", "kind", "mode", "error_type", "warn", "failures"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_trigger_table(
    name: str,
    header: str | None,
    env: Environment,
    kind: RouteKind,
    mode: str,
    error_type: str,
    warn: str,
    failures: tuple[str, ...],
) -> None:
    d = decide(header, env, kind, mode)
    assert d.error_type == error_type
    assert bool(d.refusal) == (error_type == "invalid_request")
    trigger = d.trigger
    assert (trigger.warn_event if trigger else "") == warn
    assert (trigger.failure_events if trigger else ()) == failures


def test_the_six_names_are_exactly_decisions_md() -> None:
    assert set(NAMES) == {
        "rate_limited",
        "service_unavailable",
        "search_quota_exhausted",
        "credit_exhausted",
        "booking_failed",
        "payment_failed",
    }


def test_unknown_name_message_lists_the_six() -> None:
    d = decide("bogus", SANDBOX, ANY, "A")
    for name in NAMES:
        assert name in d.refusal


def test_live_refusal_says_sandbox_only() -> None:
    assert "live" in decide("booking_failed", LIVE, C, "A").refusal


def test_wrong_route_message_says_where() -> None:
    assert "search routes" in decide("search_quota_exhausted", SANDBOX, C, "A").refusal
    assert "mode B" in decide("payment_failed", SANDBOX, C, "A").refusal
    assert "mode A" in decide("credit_exhausted", SANDBOX, C, "B").refusal


def test_builtin_upstream_is_sandbox_only_and_known_routes_only() -> None:
    from edge.routetable import RouteTableError, parse_route

    ok = parse_route(
        {"method": "POST", "path": "/v1/hotels/bookings", "scope": "hotels:write", "creates": True,
         "upstream": {"live": "https://h.internal", "sandbox": "builtin"}}
    )  # fmt: skip
    assert ok.builtin_action == "create" and ok.kind is RouteKind.CREATE
    with pytest.raises(RouteTableError, match="sandbox only"):
        parse_route(
            {"method": "GET", "path": "/v1/hotels/search", "scope": "hotels:read",
             "upstream": {"live": "builtin", "sandbox": "https://h-sbx.internal"}}
        )  # fmt: skip
    with pytest.raises(RouteTableError, match="does not answer"):
        parse_route(
            {"method": "GET", "path": "/v1/hotels/reviews", "scope": "hotels:read",
             "upstream": {"live": "https://h.internal", "sandbox": "builtin"}}
        )  # fmt: skip


def test_the_shared_names_and_statuses_are_the_edge_s_triggers() -> None:
    # svckit.events holds the names and answers `svc trigger --failure` relies on; the edge's table says
    # what each trigger does. An error trigger answers its error's status, the others run the route (202).
    from edge.triggers import TRIGGERS
    from svckit.errors import ERROR_KINDS
    from svckit.events import TRIGGER_STATUS

    assert tuple(TRIGGERS) == NAMES == tuple(TRIGGER_STATUS)
    assert TRIGGER_STATUS == {
        name: ERROR_KINDS[t.error_type].http_status if t.error_type else 202 for name, t in TRIGGERS.items()
    }

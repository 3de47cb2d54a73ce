"""Who may publish an event (svckit.publishers), by table: every identity x every kind x both environments.

The expected sets are written out here, not read from the catalog, so a catalog entry that names the
wrong publisher fails this table. A kind added to the catalog later is held to its own entry's publishers
(``entry_allows``), so adding one needs no change here (docs/architecture.md "Two exercises")."""

from __future__ import annotations

from typing import Any

import pytest

from svckit import catalog
from svckit.catalog import EVENT_KINDS
from svckit.eventcheck import event_problem
from svckit.publishers import (
    NOT_A_PUBLISHER,
    OTHER_PRODUCT,
    SANDBOX_ONLY,
    may_publish,
    publish_refusal,
)

BOOKING = {"booking.confirmed", "booking.cancelled", "booking.modified"}
SUBJECT = {"booking.failed", "payment.succeeded", "payment.failed", "payment.refunded"}
ESIM = {"esim.provisioned", "esim.usage_threshold"}
EVERY = set(EVENT_KINDS)
AUTHSVC_KINDS = {
    "apikey.revoked",
    "apikey.leaked",
    "search_quota.threshold",
    "ledger.low_balance",
    "account.look_to_book_exceeded",
    "account.anomaly",
}

# identity -> (kinds it may publish live, kinds it may publish in the sandbox)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "edge": (set(), EVERY),  # the sandbox's samples of every kind, never live
    "svcctl": (set(), EVERY),  # operators reproduce a case in the sandbox, never live
    "authsvc": (
        AUTHSVC_KINDS,
        AUTHSVC_KINDS,
    ),
    "webhookd": (
        {"endpoint.failing", "endpoint.disabled", "endpoint.recovered", "delivery.exhausted"},
        {"endpoint.failing", "endpoint.disabled", "endpoint.recovered", "delivery.exhausted"},
    ),
    "billing": (
        {"settlement.invoice_issued", "settlement.payment_failed"},
        {"settlement.invoice_issued", "settlement.payment_failed"},
    ),
    "portal": (set(), set()),
    "product:hotels": (BOOKING | SUBJECT, BOOKING | SUBJECT),
    "product:flights": (BOOKING | SUBJECT, BOOKING | SUBJECT),
    "product:esim": (SUBJECT | ESIM, SUBJECT | ESIM),
    "product:unknown": (set(), set()),
    "product:": (set(), set()),
    "unknown": (set(), set()),
    "": (EVERY, EVERY),  # a plaintext development server: no identity to hold against anyone
}


def data_for(identity: str, kind: str) -> dict[str, Any]:
    """A valid ``data`` of ``kind``, about the identity's own product where it is a product service
    whose product the kind may be about."""
    mode = catalog.example_mode(kind)
    product = identity.removeprefix("product:") if identity.startswith("product:") else ""
    if product == "esim" and kind in SUBJECT | ESIM:
        return catalog.event_data(kind, catalog.SAMPLE_ORDER, mode)
    if product in ("hotels", "flights") and kind in BOOKING | SUBJECT:
        return catalog.event_data(kind, {**catalog.SAMPLE_BOOKING, "product": product}, mode)
    return catalog.example(kind)


# The kinds the table above names; a kind added to the catalog after it is held to its own entry (below).
NAMED = {kind for kinds in EXPECTED.values() for named in kinds if named != EVERY for kind in named}


def entry_allows(identity: str, kind: str, env: str) -> bool:
    """A kind the table does not name: its entry's publishers live and sandbox (a product service only
    about its own product), the sandbox's identities in the sandbox, a plaintext server anything."""
    entry = catalog.kind_of(kind)
    if identity == "":
        return True
    if identity in ("edge", "svcctl"):
        return env == "sandbox" and entry.sandbox
    if identity.startswith("product:"):
        own = data_for(identity, kind).get("product") == identity.removeprefix("product:")
        return identity in entry.publishers and own
    return identity in entry.publishers


def expected(identity: str, kind: str, env: str) -> bool:
    if kind not in NAMED:
        return entry_allows(identity, kind, env)
    live, sandbox = EXPECTED[identity]
    return kind in (live if env == "live" else sandbox)


CASES = [
    (identity, kind, env, expected(identity, kind, env))
    for identity in EXPECTED
    for kind in EVENT_KINDS
    for env in ("live", "sandbox")
]


def test_the_table_covers_every_identity_kind_and_environment() -> None:
    assert len(CASES) == len(EXPECTED) * len(EVENT_KINDS) * 2
    assert set(catalog.PUBLISHERS) <= set(EXPECTED)


@pytest.mark.parametrize(("identity", "kind", "env", "allowed"), CASES)
def test_may_publish(identity: str, kind: str, env: str, allowed: bool) -> None:
    data = data_for(identity, kind)
    assert event_problem(kind, "", data) is None  # the data is valid: only the publisher decides
    refusal = publish_refusal(identity, kind, env, data)
    assert (refusal is None) is allowed, refusal
    assert may_publish(identity, kind, env, data) is allowed
    if refusal is not None:
        assert refusal.reason in (NOT_A_PUBLISHER, SANDBOX_ONLY) and refusal.message


@pytest.mark.parametrize(
    ("identity", "kind", "env", "data", "reason"),
    [
        ("edge", "booking.confirmed", "live", catalog.example("booking.confirmed"), SANDBOX_ONLY),
        ("svcctl", "apikey.revoked", "live", catalog.example("apikey.revoked"), SANDBOX_ONLY),
        ("product:hotels", "apikey.revoked", "live", catalog.example("apikey.revoked"), NOT_A_PUBLISHER),
        (
            "product:hotels",
            "endpoint.disabled",
            "live",
            catalog.example("endpoint.disabled"),
            NOT_A_PUBLISHER,
        ),
        (
            "product:hotels",
            "settlement.payment_failed",
            "live",
            catalog.example("settlement.payment_failed"),
            NOT_A_PUBLISHER,
        ),
        ("billing", "booking.confirmed", "live", catalog.example("booking.confirmed"), NOT_A_PUBLISHER),
        ("product:esim", "booking.cancelled", "live", catalog.example("booking.cancelled"), NOT_A_PUBLISHER),
        # A product's kind, about another product: a hotels booking announced by flights, and back.
        ("product:flights", "booking.confirmed", "live", catalog.example("booking.confirmed"), OTHER_PRODUCT),
        (
            "product:hotels",
            "booking.failed",
            "sandbox",
            catalog.event_data("booking.failed", catalog.SAMPLE_ORDER, "A"),
            OTHER_PRODUCT,
        ),
        (
            "product:esim",
            "payment.failed",
            "live",
            catalog.event_data("payment.failed", catalog.SAMPLE_BOOKING, "B"),
            OTHER_PRODUCT,
        ),
        ("product:hotels", "booking.confirmed", "live", {}, OTHER_PRODUCT),  # no product named at all
        ("product:hotels", "booking.confirmed", "live", None, OTHER_PRODUCT),
        ("portal", "booking.confirmed", "sandbox", catalog.example("booking.confirmed"), NOT_A_PUBLISHER),
        ("authsvc", "webhook.test", "sandbox", catalog.example("webhook.test"), NOT_A_PUBLISHER),
        ("edge", "webhook.test", "sandbox", catalog.example("webhook.test"), NOT_A_PUBLISHER),
        ("authsvc", "booking.exploded", "live", {}, NOT_A_PUBLISHER),
    ],
)
def test_refusal_reasons(
    identity: str, kind: str, env: str, data: dict[str, Any] | None, reason: str
) -> None:
    refusal = publish_refusal(identity, kind, env, data)
    assert refusal is not None and refusal.reason == reason
    assert identity in refusal.message or kind in refusal.message


def test_a_refusal_quotes_little_of_what_was_sent() -> None:
    refusal = publish_refusal("product:hotels", "booking.confirmed", "live", {"product": "x" * 10_000})
    assert refusal is not None and refusal.reason == OTHER_PRODUCT and len(refusal.message) < 200

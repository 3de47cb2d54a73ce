"""Accept, Content-Type, Idempotency-Key and the customer reference (edge.negotiation), by table."""

from __future__ import annotations

import pytest

from edge.negotiation import accepts_json, check_customer_ref, check_idempotency_key, check_json_content_type
from tests.unit.edge_keys import error_type


# -- Accept, Content-Type, Idempotency-Key, customer ref --------------------------------------------
@pytest.mark.parametrize(
    ("accept", "ok"),
    [
        (None, True),
        ("", True),
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("*/*", True),
        ("application/*", True),
        ("text/html, application/json;q=0.1", True),
        ("text/html", False),
        ("application/xml", False),
        ("application/json;q=0", False),
        ("text/*", False),
    ],
)
def test_accepts_json(accept: str | None, ok: bool) -> None:
    assert accepts_json(accept) is ok


@pytest.mark.parametrize("ct", ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON"])
def test_json_content_type_ok(ct: str) -> None:
    check_json_content_type(ct)


@pytest.mark.parametrize(
    "ct", [None, "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_json_content_type_refused(ct: str | None) -> None:
    assert error_type(check_json_content_type, ct) == "unsupported_media_type"


@pytest.mark.parametrize("key", ["a", "order-123", "x" * 255, "with space ok", "~!@#$%^&*()"])
def test_idempotency_key_ok(key: str) -> None:
    assert check_idempotency_key(key) == key


@pytest.mark.parametrize(
    ("key", "etype"),
    [
        (None, "missing_idempotency_key"),
        ("", "invalid_request"),
        ("x" * 256, "invalid_request"),
        ("tab\there", "invalid_request"),
        ("caf\u00e9", "invalid_request"),
        ("nul\x00", "invalid_request"),
    ],
)
def test_idempotency_key_refused(key: str | None, etype: str) -> None:
    assert error_type(check_idempotency_key, key) == etype


@pytest.mark.parametrize("ref", ["cust_42", "a", "X" * 64, "8f14e45f-ceea-467a", "user#7"])
def test_customer_ref_ok(ref: str) -> None:
    assert check_customer_ref(ref) == ref


@pytest.mark.parametrize("ref", [None, "", "X" * 65, "john smith", "jane@example.com", "a\tb", "r\u00e9f"])
def test_customer_ref_refused(ref: str | None) -> None:
    assert error_type(check_customer_ref, ref) == "invalid_customer_ref"

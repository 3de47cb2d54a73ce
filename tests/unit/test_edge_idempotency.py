"""The idempotency fingerprint (edge.idempotency.request_hash): which differences make another request."""

from __future__ import annotations

import hashlib

import pytest
from multidict import CIMultiDict

from edge.idempotency import FINGERPRINT_HEADERS, fingerprint_headers, request_hash

REF = {"x-partner-customer-ref": "cust-1"}
BASE = ("POST", "/v1/hotels/bookings", b'{"offer": 1}', REF)


@pytest.mark.parametrize(
    ("other", "same"),
    [
        (("post", "/v1/hotels/bookings", b'{"offer": 1}', REF), True),  # method case
        (("POST", "/v1/hotels/bookings", b'{"offer": 1}', {"X-Partner-Customer-Ref": "cust-1"}), True),
        (("POST", "/v1/hotels/bookings", b'{"offer": 1}', {"x-partner-customer-ref": "cust-2"}), False),
        (("POST", "/v1/hotels/bookings", b'{"offer": 1}', {}), False),  # the header left out
        (("POST", "/v1/hotels/bookings", b'{"offer": 1}', {"x-partner-customer-ref": ""}), False),
        (("POST", "/v1/hotels/bookings", b'{"offer": 2}', REF), False),
        (("POST", "/v1/hotels/bookings/x", b'{"offer": 1}', REF), False),
        (("PUT", "/v1/hotels/bookings", b'{"offer": 1}', REF), False),
    ],
    ids=["method-case", "header-name-case", "other-ref", "no-ref", "empty-ref", "body", "path", "method"],
)
def test_what_changes_the_fingerprint(other: tuple[str, str, bytes, dict[str, str]], same: bool) -> None:
    assert (request_hash(*BASE) == request_hash(*other)) is same


def test_a_request_without_fingerprint_headers_hashes_as_before_they_counted() -> None:
    # Records stored before the headers counted still match their retries.
    assert request_hash("POST", "/v1/x", b"{}", {}) == request_hash("POST", "/v1/x", b"{}")
    assert request_hash("POST", "/v1/x", b"{}") == hashlib.sha256(b"POST\n/v1/x\n{}").hexdigest()


def test_header_values_cannot_be_confused_with_the_body() -> None:
    # Length-prefixed: moving bytes between a header value and the body is another fingerprint.
    a = request_hash("POST", "/v1/x", b"\n{}", {"x-partner-customer-ref": "a"})
    b = request_hash("POST", "/v1/x", b"{}", {"x-partner-customer-ref": "a\n"})
    assert a != b


def test_fingerprint_headers_reads_every_line_of_the_listed_headers_only() -> None:
    headers = CIMultiDict(
        [("X-Partner-Customer-Ref", "a"), ("x-partner-customer-ref", "b"), ("Accept-Language", "de")]
    )
    assert fingerprint_headers(headers) == {"x-partner-customer-ref": "a, b"}
    assert fingerprint_headers(CIMultiDict()) == {}
    assert all(name == name.lower() for name in FINGERPRINT_HEADERS)


def test_request_hash_covers_method_path_and_body() -> None:
    base = request_hash("POST", "/v1/x", b"{}")
    assert base == request_hash("post", "/v1/x", b"{}")
    assert len({base, request_hash("POST", "/v1/y", b"{}"), request_hash("POST", "/v1/x", b"{ }")}) == 3

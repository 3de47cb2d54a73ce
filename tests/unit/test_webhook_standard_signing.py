"""Standard Webhooks headers (``signatureScheme`` standard/both), checked with the spec's own library."""

from __future__ import annotations

import datetime as dt
import time

import pytest
import standardwebhooks

from svckit.signing import (
    SIGNATURE_HEADER,
    STANDARD_SIGNATURE_HEADER,
    SignatureScheme,
    delivery_headers,
    new_secret,
    sign_standard,
    verify,
)

BODY = b'{"id":"evt_1","type":"booking.confirmed"}'


def test_standard_headers_verify_with_the_library_for_each_secret_of_a_rotation() -> None:
    new, old = new_secret(), new_secret()
    now = time.time()
    headers = delivery_headers([new, old], BODY, "evt_1", now, SignatureScheme.STANDARD)
    assert headers["webhook-id"] == "evt_1" and headers["webhook-timestamp"] == str(int(now))
    entries = headers[STANDARD_SIGNATURE_HEADER].split(" ")
    assert len(entries) == 2 and all(e.startswith("v1,") for e in entries)
    assert SIGNATURE_HEADER not in headers
    for secret in (new, old):  # a receiver holding either secret accepts it during the overlap
        assert standardwebhooks.Webhook(secret).verify(BODY, headers) == {
            "id": "evt_1",
            "type": "booking.confirmed",
        }
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(new_secret()).verify(BODY, headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(new).verify(BODY + b" ", headers)


@pytest.mark.parametrize(
    ("scheme", "stripe", "standard"),
    [
        (SignatureScheme.STRIPE, True, False),
        (SignatureScheme.STANDARD, False, True),
        (SignatureScheme.BOTH, True, True),
    ],
)
def test_each_scheme_carries_its_headers(scheme: SignatureScheme, stripe: bool, standard: bool) -> None:
    secret = new_secret()
    now = int(time.time())
    headers = delivery_headers([secret], BODY, "evt_2", now, scheme)
    assert (SIGNATURE_HEADER in headers) is stripe
    assert ("webhook-signature" in headers) is standard
    assert headers["X-Service-Event-Id"] == "evt_2"
    if stripe:  # the spec's scheme is unchanged: the whole secret string is its HMAC key
        assert verify(BODY, headers[SIGNATURE_HEADER], secret, now) == now
    if standard:
        standardwebhooks.Webhook(secret).verify(BODY, headers)


def test_standard_signature_is_the_libraries_own() -> None:
    secret = new_secret()
    now = int(time.time())
    ours = sign_standard([secret], "evt_3", BODY, now)[STANDARD_SIGNATURE_HEADER]
    theirs = standardwebhooks.Webhook(secret).sign(
        "evt_3", dt.datetime.fromtimestamp(now, dt.UTC), BODY.decode()
    )
    assert ours == theirs


def test_a_secret_that_is_not_base64_is_refused_without_showing_it() -> None:
    with pytest.raises(ValueError) as info:
        sign_standard(["whsec_not*base64!"], "evt_4", BODY, 0)
    assert "not*base64" not in str(info.value)
    with pytest.raises(ValueError):
        sign_standard([], "evt_4", BODY, 0)

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac

import pytest

from webhookd import (
    NoMatchingSignature,
    SignatureFormatError,
    TimestampTooNew,
    TimestampTooOld,
    WebhookVerificationError,
    new_secret,
    sign,
    verify,
)

BODY = b'{"id":"evt_1","type":"booking.confirmed"}'
S_NEW = "whsec_" + base64.b64encode(b"n" * 32).decode()
S_OLD = "whsec_" + base64.b64encode(b"o" * 32).decode()
T = 1_767_225_600


def _hex(secret: str, t: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def test_sign_matches_spec_formula_newest_first() -> None:
    header = sign([S_NEW, S_OLD], BODY, T)
    assert header == f"t={T},v1={_hex(S_NEW, T, BODY)},v1={_hex(S_OLD, T, BODY)}"
    assert (
        sign([S_NEW], BODY, dt.datetime.fromtimestamp(T + 0.9, dt.UTC)) == f"t={T},v1={_hex(S_NEW, T, BODY)}"
    )


def test_new_secret_shape() -> None:
    s = new_secret()
    assert s.startswith("whsec_") and len(base64.b64decode(s[6:])) == 32 and s != new_secret()


@pytest.mark.parametrize(
    ("header", "secrets", "now", "error"),
    [
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, None),
        (f"t={T},v1={_hex(S_OLD, T, BODY)},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, None),
        (f"t={T},v1={_hex(S_NEW, T, BODY)},v1={_hex(S_OLD, T, BODY)}", [S_OLD], T, None),
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_OLD, S_NEW], T, None),
        (f"t={T},v0=abc,v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, None),
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T + 300, None),
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T - 300, None),
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T + 301, TimestampTooOld),
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T - 301, TimestampTooNew),
        (f"t={T},v1={_hex(S_NEW, T, BODY)}", [S_OLD], T, NoMatchingSignature),
        (f"t={T + 1},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, NoMatchingSignature),
        (f"t={T},v1={_hex(S_NEW, T, BODY + b' ')}", [S_NEW], T, NoMatchingSignature),
        # A stale header with a wrong signature is "no match": the signature is checked first.
        (f"t={T},v1={_hex(S_OLD, T, BODY)}", [S_NEW], T + 9999, NoMatchingSignature),
        ("", [S_NEW], T, SignatureFormatError),
        ("garbage", [S_NEW], T, SignatureFormatError),
        (f"v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, SignatureFormatError),
        (f"t={T}", [S_NEW], T, SignatureFormatError),
        (f"t=abc,v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, SignatureFormatError),
        (f"t={T},t={T},v1={_hex(S_NEW, T, BODY)}", [S_NEW], T, SignatureFormatError),
        (f"t={T},v1=XYZ", [S_NEW], T, SignatureFormatError),
        (f"t={T},v1={_hex(S_NEW, T, BODY).upper()}", [S_NEW], T, SignatureFormatError),
    ],
)
def test_verify_table(header: str, secrets: list[str], now: int, error: type[Exception] | None) -> None:
    if error is None:
        assert verify(BODY, header, secrets, now) == T
    else:
        with pytest.raises(error) as info:
            verify(BODY, header, secrets, now)
        assert isinstance(info.value, WebhookVerificationError)
        assert "whsec_" not in str(info.value)


def test_verify_roundtrip_and_datetime_now_and_tolerance() -> None:
    now = dt.datetime.fromtimestamp(T, dt.UTC)
    header = sign([S_NEW, S_OLD], BODY, now)
    assert verify(BODY, header, S_OLD, now) == T
    assert verify(BODY, header, S_NEW, now + dt.timedelta(seconds=10), tolerance=10) == T
    with pytest.raises(TimestampTooOld):
        verify(BODY, header, S_NEW, now + dt.timedelta(seconds=11), tolerance=10)


def test_sign_and_verify_need_a_secret() -> None:
    with pytest.raises(ValueError):
        sign([], BODY, T)
    with pytest.raises(ValueError):
        verify(BODY, f"t={T},v1={_hex(S_NEW, T, BODY)}", [], T)


def test_webhookd_signs_with_svckit_signing() -> None:
    # The partner's CLI signs (svc listen) and verifies (svc verify) with svckit.signing, loading no
    # webhookd: the same functions, the same error classes, the same delivery headers.
    import svckit.signing
    import webhookd

    assert (webhookd.sign, webhookd.verify, webhookd.new_secret) == (
        svckit.signing.sign,
        svckit.signing.verify,
        svckit.signing.new_secret,
    )
    assert webhookd.WebhookVerificationError is svckit.signing.WebhookVerificationError
    assert webhookd.NoMatchingSignature is svckit.signing.NoMatchingSignature
    assert webhookd.delivery_headers([S_NEW], BODY, "evt_1", T) == svckit.signing.delivery_headers(
        [S_NEW], BODY, "evt_1", T
    )

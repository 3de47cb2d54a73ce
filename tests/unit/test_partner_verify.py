"""The partner's side of a delivery's signature: ``verify_standard`` against what the ``standardwebhooks``
library signs, ``verify_delivery`` picking the scheme the delivery carries, ``svc verify``'s headers, and
``svc trigger``'s line, whose count includes the deliveries held for disabled endpoints."""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pytest
import standardwebhooks

from svccli import (
    NoMatchingSignature,
    SignatureFormatError,
    TimestampTooNew,
    TimestampTooOld,
    verify_delivery,
    verify_standard,
)
from svccli.__main__ import main, trigger_line, verify_headers
from svckit.signing import SignatureScheme, delivery_headers, new_secret
from tests.support import ROOT

NOW = 1_790_000_000
BODY = json.dumps({"id": "evt_1", "type": "booking.confirmed"}, separators=(",", ":")).encode()


def standard_headers(secret: str, body: bytes = BODY, at: int = NOW, msg_id: str = "evt_1") -> dict[str, str]:
    """What the Standard Webhooks library itself signs: the reference, not our signer."""
    sig = standardwebhooks.Webhook(secret).sign(msg_id, dt.datetime.fromtimestamp(at, dt.UTC), body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(at), "webhook-signature": sig}


def test_verify_standard_accepts_the_librarys_signature() -> None:
    secret = new_secret()
    assert verify_standard(BODY, standard_headers(secret), secret, NOW) == NOW


def test_verify_standard_accepts_any_secret_of_a_rotation_and_skips_v1a() -> None:
    old, new = new_secret(), new_secret()
    headers = delivery_headers(
        [new, old], BODY, "evt_1", NOW, SignatureScheme.STANDARD, signers=[lambda content: b"x" * 64]
    )
    assert "v1a," in headers["webhook-signature"]
    assert verify_standard(BODY, headers, [old], NOW) == NOW
    assert verify_standard(BODY, {k.upper(): v for k, v in headers.items()}, [new], NOW) == NOW


def test_the_library_accepts_what_we_sign() -> None:
    secret = new_secret()
    now = int(dt.datetime.now(dt.UTC).timestamp())
    headers = delivery_headers([secret], BODY, "evt_1", now, SignatureScheme.STANDARD)
    assert standardwebhooks.Webhook(secret).verify(BODY, headers)["id"] == "evt_1"
    assert verify_standard(BODY, headers, secret, now) == now


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"body": BODY.replace(b"}", b" }")}, NoMatchingSignature),
        ({"secret": "other"}, NoMatchingSignature),
        ({"now": NOW + 301}, TimestampTooOld),
        ({"now": NOW - 301}, TimestampTooNew),
        ({"drop": "webhook-id"}, SignatureFormatError),
        ({"drop": "webhook-signature"}, SignatureFormatError),
        ({"set": ("webhook-timestamp", "soon")}, SignatureFormatError),
        ({"set": ("webhook-signature", "v1a,AAAA")}, SignatureFormatError),
        ({"set": ("webhook-signature", "v1,@@@")}, SignatureFormatError),
    ],
    ids=[
        "tampered",
        "wrong-secret",
        "too-old",
        "too-new",
        "no-id",
        "no-signature",
        "bad-time",
        "no-v1",
        "not-b64",
    ],
)
def test_verify_standard_refusals(change: dict[str, Any], error: type[Exception]) -> None:
    secret = new_secret()
    headers = standard_headers(secret)
    if "drop" in change:
        del headers[change["drop"]]
    if "set" in change:
        name, value = change["set"]
        headers[name] = value
    key = new_secret() if change.get("secret") else secret
    with pytest.raises(error):
        verify_standard(change.get("body", BODY), headers, key, change.get("now", NOW))


def test_verify_standard_within_the_tolerance_either_side() -> None:
    secret = new_secret()
    assert verify_standard(BODY, standard_headers(secret), secret, NOW + 300) == NOW
    assert verify_standard(BODY, standard_headers(secret), secret, NOW - 300) == NOW


@pytest.mark.parametrize("scheme", list(SignatureScheme))
def test_verify_delivery_checks_whichever_headers_the_delivery_carries(scheme: SignatureScheme) -> None:
    secret = new_secret()
    headers = delivery_headers([secret], BODY, "evt_1", NOW, scheme)
    got = verify_delivery(BODY, headers, [secret], NOW)
    assert got.event_id == "evt_1" and got.timestamp == NOW
    assert got.scheme == ("standard" if scheme is SignatureScheme.STANDARD else "stripe")
    with pytest.raises(NoMatchingSignature):
        verify_delivery(BODY + b" ", headers, [secret], NOW)


def test_verify_delivery_without_signature_headers() -> None:
    with pytest.raises(SignatureFormatError):
        verify_delivery(BODY, {"Content-Type": "application/json"}, [new_secret()], NOW)


def test_svc_verify_headers() -> None:
    assert verify_headers(["t=1,v1=ab"]) == {"X-Service-Signature": "t=1,v1=ab"}
    assert verify_headers(["X-Service-Signature: t=1,v1=ab"]) == {"X-Service-Signature": "t=1,v1=ab"}
    assert verify_headers(["webhook-id: evt_1", "webhook-signature: v1,abc="]) == {
        "webhook-id": "evt_1",
        "webhook-signature": "v1,abc=",
    }


def test_svc_verify_standard_headers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = new_secret()
    now = int(dt.datetime.now(dt.UTC).timestamp())
    headers = standard_headers(secret, at=now)

    class Stdin:
        buffer = io.BytesIO(BODY)

    monkeypatch.setattr("sys.stdin", Stdin)
    args = ["verify", "--secret", secret, *(a for k, v in headers.items() for a in ("--header", f"{k}: {v}"))]
    assert main(args) == 0
    assert "signature valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("count", "held", "says"),
    [
        (0, 0, "(no endpoint subscribed, or none whose filter it matches; on the stream)"),
        (1, 0, "(delivering to 1 endpoint; on the stream)"),
        (3, 0, "(delivering to 3 endpoints; on the stream)"),
        (
            1,
            1,
            "(delivering to 0 endpoints; held for 1 disabled endpoint until enabled; on the stream)",
        ),
        (
            3,
            2,
            "(delivering to 1 endpoint; held for 2 disabled endpoints until enabled; on the stream)",
        ),
        (2, None, "(2 endpoints subscribed, disabled ones included, whose delivery is held; on the stream)"),
    ],
)
def test_trigger_line_counts_held_deliveries_apart(count: int, held: int | None, says: str) -> None:
    assert (
        trigger_line("booking.confirmed", "evt_1", count, held)
        == f"Triggered booking.confirmed: evt_1 {says}"
    )


def test_the_walkthrough_shows_the_receiver_example_as_it_is() -> None:
    """docs/sandbox.md's receiver is examples/receivers/receiver_svc_partner.py, which the e2e test runs."""
    example = (ROOT / "examples" / "receivers" / "receiver_svc_partner.py").read_text().rstrip("\n")
    shown = "\n".join(f"   {line}" if line else "" for line in example.split("\n"))
    assert f"   ```python\n{shown}\n   ```" in (ROOT / "docs" / "sandbox.md").read_text()

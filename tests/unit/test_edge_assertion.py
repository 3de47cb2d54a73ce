"""The edge's signed assertion (svckit.edgeassertion): what an upstream behind a TLS-terminating proxy
accepts, as a table; the edge's side (edge.upstream) and the reference service's use of it."""

from __future__ import annotations

import base64
import dataclasses
import json
import pathlib
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edge.authcache import Caller
from edge.environments import Environment
from edge.gate import Ctx
from edge.upstream import assertion, signing_key
from examples.hotels.identity import Identity, Refusal, identify
from svckit.edgeassertion import LIFETIME, Claims, claims_for, sign, verify

KEY = Ed25519PrivateKey.generate()
OTHER = Ed25519PrivateKey.generate()
NOW = 1_800_000_000.0
GOOD = claims_for("acct_1", "key_1", "live", "trv_1", "req_1", "POST", "/v1/hotels/bookings", NOW)


def _tamper(header: str, **changes: object) -> str:
    """The header with its claims changed and the original signature kept."""
    version, payload, signature = header.split(".")
    raw = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    raw.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(raw).encode()).rstrip(b"=").decode()
    return f"{version}.{forged}.{signature}"


@pytest.mark.parametrize(
    ("header", "now", "method", "path", "expected"),
    [
        (sign(KEY, GOOD), NOW, "POST", "/v1/hotels/bookings", GOOD),
        (sign(KEY, GOOD), NOW + LIFETIME, "POST", "/v1/hotels/bookings", GOOD),
        (sign(KEY, GOOD), NOW + LIFETIME + 1, "POST", "/v1/hotels/bookings", "expired"),
        (sign(KEY, GOOD), NOW - 10, "POST", "/v1/hotels/bookings", "issued in the future"),
        (sign(KEY, GOOD), NOW - 3, "POST", "/v1/hotels/bookings", GOOD),  # within the clock skew
        # Replayed on another route, or another method of the same path.
        (sign(KEY, GOOD), NOW, "POST", "/v1/flights/bookings", "made for another request"),
        (sign(KEY, GOOD), NOW, "GET", "/v1/hotels/bookings", "made for another request"),
        # Signed by someone else, or another account written into a genuine one.
        (sign(OTHER, GOOD), NOW, "POST", "/v1/hotels/bookings", "bad signature"),
        (_tamper(sign(KEY, GOOD), account="acct_2"), NOW, "POST", "/v1/hotels/bookings", "bad signature"),
        # Even the edge's key does not make an assertion that lives longer than LIFETIME.
        (
            sign(KEY, dataclasses.replace(GOOD, expires=GOOD.issued + 3600)),
            NOW + 120,
            "POST",
            "/v1/hotels/bookings",
            "lives too long",
        ),
        ("", NOW, "POST", "/v1/hotels/bookings", "missing"),
        ("v1." + "a" * 5000, NOW, "POST", "/v1/hotels/bookings", "too long"),
        ("v1.abc", NOW, "POST", "/v1/hotels/bookings", "malformed"),
        ("v2" + sign(KEY, GOOD)[2:], NOW, "POST", "/v1/hotels/bookings", "malformed"),
        ("v1.!!!.???", NOW, "POST", "/v1/hotels/bookings", "malformed"),
        ("v1.e30.AAAA", NOW, "POST", "/v1/hotels/bookings", "bad signature"),
    ],
)
def test_an_upstream_accepts_only_a_fresh_genuine_assertion_for_its_request(
    header: str, now: float, method: str, path: str, expected: Claims | str
) -> None:
    assert verify(header, KEY.public_key(), method=method, path=path, now=now) == expected


def test_signed_claims_that_are_not_claims_are_malformed() -> None:
    version, _payload, _sig = sign(KEY, GOOD).split(".")
    payload = base64.urlsafe_b64encode(b'{"account": "acct_1"}').rstrip(b"=").decode()
    signature = base64.urlsafe_b64encode(KEY.sign(f"{version}.{payload}".encode())).rstrip(b"=").decode()
    got = verify(f"{version}.{payload}.{signature}", KEY.public_key(), method="POST", path="/", now=NOW)
    assert got == "malformed"


def test_the_edge_signs_what_it_forwards(tmp_path: pathlib.Path) -> None:
    pem = KEY.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "edge-upstream.key").write_bytes(pem)
    loaded = signing_key(str(tmp_path / "edge-upstream.key"))
    assert loaded is not None and signing_key("") is None
    (tmp_path / "not-a-key").write_text("hello")
    with pytest.raises(ValueError, match="--upstream-signing-key-file"):
        signing_key(str(tmp_path / "not-a-key"))
    caller = Caller("key_9", "acct_9", "sandbox", ("hotels:write",), "active")
    ctx = Ctx("req_9", Environment.SANDBOX, caller, "127.0.0.1", traveller_id="trv_9")
    header = assertion(loaded, ctx, "POST", "/v1/hotels/bookings")
    claims = verify(header, KEY.public_key(), method="POST", path="/v1/hotels/bookings", now=time.time())
    assert isinstance(claims, Claims), claims
    assert (claims.account, claims.key, claims.environment, claims.traveller, claims.request_id) == (
        "acct_9",
        "key_9",
        "sandbox",
        "trv_9",
        "req_9",
    )
    assert claims.expires - claims.issued == LIFETIME


def test_with_an_assertion_the_reference_service_ignores_peer_and_headers() -> None:
    forged = {"x-account-id": "acct_forged", "x-environment": "live"}
    got = identify("proxy", forged, trusted={"edge"}, tls=True, asserted=GOOD)
    assert got == Identity("acct_1", "key_1", "live", "trv_1")
    refused = identify("edge", forged, trusted={"edge"}, tls=True, asserted="expired")
    assert isinstance(refused, Refusal) and (refused.status, refused.type) == (403, "forbidden")
    assert "expired" in refused.message

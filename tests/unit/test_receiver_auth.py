"""Receivers that authenticate us, the pure parts by table: which custom headers may be sent
(``header_refusal``), which uploaded certificates are taken (``check_uploaded``), what a token endpoint's
answer means (``read_answer``), the stored form round trip, and the token cache (one fetch for many
callers at once, a refused token replaced once)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from svckit.devca import make_ca
from webhookd._client_tls import ClientContexts, PlatformCa, check_uploaded
from webhookd._errors import InvalidRequest
from webhookd._oauth2 import MARGIN, TokenError, Tokens, read_answer, token_request
from webhookd._receiver_auth import (
    MAX_HEADERS,
    OAuth2Credentials,
    ReceiverAuth,
    checked_headers,
    header_refusal,
    of_stored,
    stored,
)

NOW = dt.datetime.now(dt.UTC)

HEADERS = [
    # (name, value, refused because ... (a fragment of the reason) or None)
    ("X-Partner-Tenant", "t-42", None),
    ("x-api-version", "2024-01-01", None),
    ("Accept-Language", "en", None),
    ("X-Service-Signature", "t=1,v1=0", "set by us"),
    ("x-service-event-id", "evt", "set by us"),
    ("X-Service-Anything-New", "v", "set by us"),  # our prefix: a future header of ours
    ("webhook-id", "msg", "set by us"),
    ("Webhook-Signature", "v1,x", "set by us"),
    ("webhook-future", "v", "set by us"),
    ("Content-Type", "text/plain", "set by us"),
    ("content-length", "1", "set by us"),
    ("User-Agent", "me", "set by us"),
    ("Host", "evil.example", "set by us"),
    ("Transfer-Encoding", "chunked", "set by us"),
    ("traceparent", "00-0-0-00", "set by us"),
    ("Proxy-Connection", "keep-alive", "set by us"),
    ("Authorization", "Bearer abc", "credential"),
    ("cookie", "a=b", "credential"),
    ("X Bad", "v", "not a token"),
    ("", "v", "not a token"),
    ("X-" + "a" * 63, "v", "not a token"),  # 65 characters
    ("X-Ünicode", "v", "not a token"),
    ("X-Ok", "line\r\nInjected: 1", "visible ASCII"),
    ("X-Ok", "caf\u00e9", "visible ASCII"),
    ("X-Ok", " padded", "visible ASCII"),
    ("X-Ok", "v" * 1025, "longer than"),
    ("X-Ok", "v" * 1024, None),
]


@pytest.mark.parametrize(("name", "value", "refused"), HEADERS)
def test_header_refusal(name: str, value: str, refused: str | None) -> None:
    reason = header_refusal(name, value)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


def test_headers_bounded_and_one_spelling_each() -> None:
    assert checked_headers({"X-B": "1", "x-a": "2"}) == (("x-a", "2"), ("X-B", "1"))
    with pytest.raises(InvalidRequest, match=f"at most {MAX_HEADERS}"):
        checked_headers({f"X-H{i}": "v" for i in range(MAX_HEADERS + 1)})
    with pytest.raises(InvalidRequest, match="given twice"):
        checked_headers({"X-A": "1", "x-a": "2"})
    with pytest.raises(InvalidRequest, match="longer than 4096"):
        checked_headers({f"X-H{i}": "v" * 1000 for i in range(5)})
    with pytest.raises(InvalidRequest, match="webhook-id"):
        checked_headers({"webhook-id": "x"})


def _pems(cert: trustme.LeafCert) -> tuple[str, str]:
    return cert.cert_chain_pems[0].bytes().decode(), cert.private_key_pem.bytes().decode()


def test_uploaded_certificates() -> None:
    ca = trustme.CA()
    cert_pem, key_pem = _pems(ca.issue_cert("partner.example"))
    taken = check_uploaded(cert_pem, key_pem, NOW)
    assert not taken.issued_by_platform and len(taken.fingerprint) == 64 and taken.not_after > NOW
    other_cert, other_key = _pems(ca.issue_cert("other.example"))
    small = rsa.generate_private_key(65537, 1024).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    expired = trustme.CA().issue_cert("old.example", not_after=NOW - dt.timedelta(days=1))
    cases = [
        ((cert_pem, other_key), "not the key of the certificate"),
        (("not a pem", key_pem), "not a PEM certificate"),
        ((cert_pem, "not a key"), "not an unencrypted PEM private key"),
        ((cert_pem, small.decode()), "at least 2048 bits"),
        (_pems(expired), "expired"),
        ((cert_pem, ""), "both the certificate and its private key"),
        ((cert_pem + "x" * 40000, key_pem), "at most"),
        ((other_cert, key_pem), "not the key of the certificate"),
    ]
    for (c, k), message in cases:
        with pytest.raises(InvalidRequest, match=message) as err:
            check_uploaded(c, k, NOW)
        assert len(k) < 80 or k[30:80] not in err.value.message  # never the key


def test_platform_ca_issues_a_client_certificate_per_account() -> None:
    ca = PlatformCa(*make_ca("platform client CA"))
    cert = ca.issue("acct_7", NOW)
    assert cert.issued_by_platform and cert.subject == "CN=acct_7"
    assert check_uploaded(cert.cert_pem, cert.key_pem, NOW).fingerprint == cert.fingerprint
    # Its TLS context is built once and kept per endpoint and certificate.
    contexts = ClientContexts(kept=2)
    auth = ReceiverAuth("we_1", mtls=cert)
    first = contexts.get(auth)
    assert first is not None and contexts.get(auth) is first and contexts.built == 1
    contexts.get(ReceiverAuth("we_2", mtls=cert))
    contexts.get(ReceiverAuth("we_3", mtls=cert))
    assert contexts.get(auth) is not first and contexts.built == 4  # bounded: the oldest went


def test_stored_form_keeps_secrets_apart() -> None:
    cert = PlatformCa(*make_ca()).issue("acct_1", NOW)
    creds = OAuth2Credentials("https://auth.example/token", "cid", "s3cret", "a b", "aud")
    auth = ReceiverAuth("we_1", cert, creds, (("X-A", "1"),))
    public, secrets = stored(auth)
    assert "s3cret" not in public and cert.key_pem not in public and "PRIVATE" not in public
    assert json.loads(secrets) == {"key": cert.key_pem, "clientSecret": "s3cret"}
    assert of_stored("we_1", public, secrets) == auth
    assert stored(None) == ("", "") and stored(ReceiverAuth("we_1")) == ("", "")
    assert of_stored("we_1", "", "") is None


ANSWERS = [
    # (status, body, token and lifetime, or the error's text)
    (200, b'{"access_token":"t1","token_type":"Bearer","expires_in":600}', ("t1", 600.0)),
    (200, b'{"access_token":"t1","token_type":"bearer","expires_in":"60"}', ("t1", 60.0)),
    (200, b'{"access_token":"t1"}', ("t1", 300.0)),
    (200, b'{"access_token":"t1","expires_in":99999999}', ("t1", 86400.0)),
    (200, b'{"access_token":"t1","token_type":"mac"}', "not a bearer token"),
    (200, b'{"access_token":"","expires_in":60}', "no usable access_token"),
    (200, b'{"token":"t1"}', "no usable access_token"),
    (200, b'{"access_token":"t1","expires_in":0}', "not a positive number"),
    (200, b'{"access_token":"t1","expires_in":true}', "not a positive number"),
    (200, b"<html>", "not a JSON object"),
    (
        401,
        b'{"error":"invalid_client","error_description":"secret s3cret is wrong"}',
        "HTTP 401 (error invalid_client)",
    ),
    (400, b'{"error":"bad\\"code"}', "HTTP 400"),
    (503, b"down", "HTTP 503"),
]


@pytest.mark.parametrize(("status", "body", "expected"), ANSWERS)
def test_token_answers(status: int, body: bytes, expected: tuple[str, float] | str) -> None:
    if isinstance(expected, tuple):
        assert read_answer(status, body) == expected
    else:
        with pytest.raises(TokenError) as err:
            read_answer(status, body)
        assert expected in str(err.value) and "s3cret" not in str(err.value) and '"' not in str(err.value)


def test_token_request_authenticates_with_basic() -> None:
    headers, body = token_request(
        OAuth2Credentials("https://a.example/t", "id:1", "p&w", "read write", "api")
    )
    assert headers["Authorization"] == "Basic aWQlM0ExOnAlMjZ3"  # id%3A1:p%26w, as RFC 6749 2.3.1 asks
    assert body == b"grant_type=client_credentials&scope=read+write&audience=api"


async def test_tokens_single_flight_expiry_and_refusal() -> None:
    now = [1000.0]
    fetched: list[str] = []
    gate = asyncio.Event()

    async def fetch(creds: OAuth2Credentials) -> tuple[str, float]:
        await gate.wait()
        fetched.append(f"t{len(fetched) + 1}")
        return fetched[-1], 100.0

    tokens = Tokens(fetch, clock=lambda: now[0])
    auth = ReceiverAuth("we_1", oauth2=OAuth2Credentials("https://a.example/t", "id", "secret"))
    waiting = [asyncio.ensure_future(tokens.token(auth)) for _ in range(50)]
    await asyncio.sleep(0)
    gate.set()
    assert set(await asyncio.gather(*waiting)) == {"t1"} and fetched == ["t1"]
    # Refused by the receiver: many callers saw the 401 at once, one new token for all of them.
    again = await asyncio.gather(*(tokens.token(auth, refused="t1") for _ in range(10)))
    assert set(again) == {"t2"} and len(fetched) == 2
    assert await tokens.token(auth, refused="t1") == "t2"  # an older refusal: the newer token stays
    now[0] += 100.0 - MARGIN  # its expiry less the margin: fetched again
    assert await tokens.token(auth) == "t3"
    # Other credentials on the endpoint are another token.
    changed = ReceiverAuth("we_1", oauth2=OAuth2Credentials("https://a.example/t", "id", "new-secret"))
    assert await tokens.token(changed) == "t4"


async def test_a_failed_fetch_fails_every_waiter_and_is_not_kept() -> None:
    calls = 0

    async def fetch(creds: OAuth2Credentials) -> tuple[str, float]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        if calls == 1:
            raise TokenError("the OAuth2 token endpoint answered HTTP 500")
        return "t", 60.0

    tokens = Tokens(fetch)
    auth = ReceiverAuth("we_1", oauth2=OAuth2Credentials("https://a.example/t", "id", "secret"))
    results = await asyncio.gather(*(tokens.token(auth) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, TokenError) for r in results) and calls == 1
    assert await tokens.token(auth) == "t" and calls == 2

"""The pure authorisation decision, by table: every rule of spec §5 and every auth row of decisions.md."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from authsvc import AccessRequest, Credential, authorize
from authsvc._decision import reusable
from authsvc._model import Account, ApiKey, KeyGrant
from svckit.vocabulary import AccountMode, AccountStatus, Environment

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)

ACCOUNT = Account(
    id="acct_1",
    name="P",
    mode=AccountMode.A,
    status=AccountStatus.ACTIVE,
    admin_emails=(),
    daily_search_allowance=100,
    created_at=NOW,
    updated_at=NOW,
)
KEY = ApiKey(
    id="key_1",
    account_id="acct_1",
    environment=Environment.LIVE,
    name="k",
    scopes=("hotels:read", "flights:write"),
    allowed_sources=(),
    hint="svc_live_...abcd",
    secret_hash="0" * 64,
    created_at=NOW - 3600 * SEC,
)


def grant(account_status: str = "active", **key_fields: object) -> KeyGrant:
    key = dataclasses.replace(KEY, **key_fields)  # type: ignore[arg-type]
    return KeyGrant.of(key, dataclasses.replace(ACCOUNT, status=account_status))  # type: ignore[arg-type]


def req(
    env: str = "live",
    scope: str = "hotels:read",
    source: str = "203.0.113.7",
    write: bool = False,
    credential: Credential = Credential.WELL_FORMED,
) -> AccessRequest:
    return AccessRequest(env, scope, source, write, credential)  # type: ignore[arg-type]


V4 = ("203.0.113.0/24", "198.51.100.9")
V6 = ("2001:db8::/32", "2001:db8:ffff::1")

CASES = [
    # (name, grant, request, allowed, error_type, ttl)
    ("allow", grant(), req(), True, "", 60.0),
    ("missing key", None, req(credential=Credential.MISSING), False, "missing_api_key", 0.0),
    ("malformed key", None, req(credential=Credential.MALFORMED), False, "invalid_api_key", 60.0),
    ("unknown key", None, req(), False, "invalid_api_key", 60.0),
    ("revoked key", grant(revoked_at=NOW - SEC), req(), False, "invalid_api_key", 60.0),
    ("revoked at this instant", grant(revoked_at=NOW), req(), False, "invalid_api_key", 60.0),
    ("expired key", grant(expires_at=NOW - SEC), req(), False, "invalid_api_key", 60.0),
    ("expires at this instant", grant(expires_at=NOW), req(), False, "invalid_api_key", 60.0),
    ("rotated-out key still in grace", grant(expires_at=NOW + 3600 * SEC), req(), True, "", 60.0),
    ("ttl capped at expiry", grant(expires_at=NOW + 10 * SEC), req(), True, "", 10.0),
    ("ttl capped at expiry (sub-second)", grant(expires_at=NOW + SEC / 2), req(), True, "", 0.5),
    (
        "test key on live host",
        grant(environment="sandbox"),
        req(env="live"),
        False,
        "environment_mismatch",
        60.0,
    ),
    ("live key on sandbox host", grant(), req(env="sandbox"), False, "environment_mismatch", 60.0),
    ("sandbox key on sandbox host", grant(environment="sandbox"), req(env="sandbox"), True, "", 60.0),
    (
        "revoked beats environment",
        grant(environment="sandbox", revoked_at=NOW),
        req(),
        False,
        "invalid_api_key",
        60,
    ),
    ("missing scope", grant(), req(scope="hotels:write"), False, "missing_scope", 60.0),
    ("missing scope other resource", grant(), req(scope="esim:read"), False, "missing_scope", 60.0),
    ("write scope does not imply read", grant(), req(scope="flights:read"), False, "missing_scope", 60.0),
    ("granted write scope", grant(), req(scope="flights:write", write=True), True, "", 60.0),
    ("no scope required: authenticate only", grant(), req(scope=""), True, "", 60.0),
    ("empty allow list accepts any source", grant(), req(source="192.0.2.1"), True, "", 60.0),
    ("empty allow list accepts unknown source", grant(), req(source=""), True, "", 60.0),
    ("ipv4 in cidr", grant(allowed_sources=V4), req(source="203.0.113.200"), True, "", 60.0),
    ("ipv4 exact address", grant(allowed_sources=V4), req(source="198.51.100.9"), True, "", 60.0),
    ("ipv4 outside", grant(allowed_sources=V4), req(source="198.51.100.10"), False, "ip_not_allowed", 60.0),
    ("ipv4-mapped ipv6 source", grant(allowed_sources=V4), req(source="::ffff:203.0.113.5"), True, "", 60.0),
    ("ipv6 in cidr", grant(allowed_sources=V6), req(source="2001:db8:1::5"), True, "", 60.0),
    ("ipv6 exact", grant(allowed_sources=V6), req(source="2001:db8:ffff::1"), True, "", 60.0),
    ("ipv6 outside", grant(allowed_sources=V6), req(source="2001:db9::1"), False, "ip_not_allowed", 60.0),
    (
        "ipv4 source vs ipv6 list",
        grant(allowed_sources=V6),
        req(source="203.0.113.5"),
        False,
        "ip_not_allowed",
        60,
    ),
    ("no source with a list", grant(allowed_sources=V4), req(source=""), False, "ip_not_allowed", 60.0),
    (
        "garbage source with a list",
        grant(allowed_sources=V4),
        req(source="nope"),
        False,
        "ip_not_allowed",
        60.0,
    ),
    (
        "ip checked before scope",
        grant(allowed_sources=V4),
        req(source="192.0.2.1", scope="esim:write"),
        False,
        "ip_not_allowed",
        60.0,
    ),
    (
        "read-only account: write refused",
        grant("read_only"),
        req(scope="flights:write", write=True),
        False,
        "account_read_only",
        60.0,
    ),
    ("read-only account: read allowed", grant("read_only"), req(), True, "", 60.0),
    (
        "read-only account: booking refused",
        grant("read_only", scopes=("hotels:write",)),
        req(scope="hotels:write", write=True),
        False,
        "account_read_only",
        60.0,
    ),
    (
        "read-only account: eSIM order refused",
        grant("read_only", scopes=("esim:write",)),
        req(scope="esim:write", write=True),
        False,
        "account_read_only",
        60.0,
    ),
    (
        "read-only account: traveller record deleted",
        grant("read_only", scopes=("account:write",)),
        req(scope="account:write", write=True),
        True,
        "",
        60.0,
    ),
    (
        "read-only account: webhooks managed",
        grant("read_only", scopes=("webhooks:write",)),
        req(scope="webhooks:write", write=True),
        True,
        "",
        60.0,
    ),
    (
        "active account: booking allowed",
        grant(scopes=("hotels:write",)),
        req(scope="hotels:write", write=True),
        True,
        "",
        60.0,
    ),
    (
        "scope checked before read-only",
        grant("read_only"),
        req(scope="esim:write", write=True),
        False,
        "missing_scope",
        60.0,
    ),
]


@pytest.mark.parametrize(("name", "g", "r", "allowed", "error_type", "ttl"), CASES, ids=[c[0] for c in CASES])
def test_decision_table(
    name: str, g: KeyGrant | None, r: AccessRequest, allowed: bool, error_type: str, ttl: float
) -> None:
    d = authorize(g, r, NOW)
    assert d.allowed is allowed
    assert d.error_type == error_type
    assert d.cache_ttl == pytest.approx(ttl)
    assert 0 <= d.cache_ttl <= 60
    if g is not None and g.key.expires_at is not None and g.key.expires_at > NOW:
        assert NOW + dt.timedelta(seconds=d.cache_ttl) <= g.key.expires_at
    if not allowed:
        assert d.error_message


REUSABLE = [
    # (name, grant, may authsvc keep and give again its decision?)
    ("plain key", grant(), True),
    ("allow list and read-only account", grant("read_only", allowed_sources=V4), True),
    ("rotated out, expiring later", grant(expires_at=NOW + 3600 * SEC), False),
    ("expiring within the cache ttl", grant(expires_at=NOW + 30 * SEC), False),
    ("expired", grant(expires_at=NOW - SEC), False),
    ("revoked", grant(revoked_at=NOW - SEC), False),
    ("revoked in the future", grant(revoked_at=NOW + SEC), False),
]


@pytest.mark.parametrize(("name", "g", "expected"), REUSABLE, ids=[c[0] for c in REUSABLE])
def test_reusable_table(name: str, g: KeyGrant, expected: bool) -> None:
    assert reusable(g) is expected


def test_a_reusable_decision_is_the_same_at_any_time() -> None:
    """What makes keeping an answer safe: for every case of the table whose grant is reusable, the
    decision is the same a second, an hour and ten years either side of NOW."""
    kept = [c for c in CASES if c[1] is not None and reusable(c[1])]
    assert len(kept) >= 5
    for name, g, r, *_ in kept:
        assert g is not None
        d = authorize(g, r, NOW)
        for shift in (SEC, 3600 * SEC, dt.timedelta(days=3650)):
            assert authorize(g, r, NOW + shift) == d, name
            assert authorize(g, r, NOW - shift) == d, name


def test_invalid_api_key_has_one_message_whatever_the_reason() -> None:
    """Malformed, unknown, revoked and expired keys are told apart by nothing (docs/authentication.md)."""
    from svckit.apikeys import INVALID_API_KEY_MESSAGE

    refused = [(c[0], authorize(c[1], c[2], NOW)) for c in CASES if c[4] == "invalid_api_key"]
    assert len(refused) >= 6
    for name, d in refused:
        assert d.error_message == INVALID_API_KEY_MESSAGE, name


def test_missing_scope_message_names_the_scope() -> None:
    d = authorize(grant(), req(scope="webhooks:write"), NOW)
    assert "webhooks:write" in d.error_message


def test_environment_mismatch_messages_name_the_direction() -> None:
    assert "live host" in authorize(grant(environment="sandbox"), req(env="live"), NOW).error_message
    assert "sandbox host" in authorize(grant(), req(env="sandbox"), NOW).error_message


def test_ip_message_names_the_source() -> None:
    d = authorize(grant(allowed_sources=V4), req(source="192.0.2.44"), NOW)
    assert "192.0.2.44" in d.error_message

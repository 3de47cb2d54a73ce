"""Key format, scopes, allow lists, partner references and other pure input rules, by table."""

from __future__ import annotations

import datetime as dt
import math
import string

import pytest

from authsvc import InvalidCustomerRef
from authsvc._cache import KeyCache
from authsvc._keys import generate_secret, hash_secret, hint
from authsvc._model import Account, ApiKey, KeyChange, KeyGrant
from authsvc._outbox import backoff
from authsvc._validate import partner_ref
from svckit.allowlist import MAX_ENTRIES, validate_allowlist
from svckit.apikeys import CHECKSUM_LENGTH, RANDOM_LENGTH, SECRET_LENGTH, checksum, environment_of
from svckit.errors import InvalidInput
from svckit.quota import threshold_of
from svckit.scopes import ALL_SCOPES, validate_scopes
from svckit.vocabulary import AccountMode, AccountStatus, Environment

BASE62 = set(string.digits + string.ascii_letters)


@pytest.mark.parametrize(("env", "prefix"), [("live", "svc_live_"), ("sandbox", "svc_test_")])
def test_secret_format(env: str, prefix: str) -> None:
    secret = generate_secret(env)  # type: ignore[arg-type]
    assert secret.startswith(prefix)
    assert len(secret) == SECRET_LENGTH == len(prefix) + RANDOM_LENGTH + CHECKSUM_LENGTH
    assert set(secret[len(prefix) :]) <= BASE62
    assert RANDOM_LENGTH * math.log2(62) >= 190
    assert secret[-CHECKSUM_LENGTH:] == checksum(secret[:-CHECKSUM_LENGTH])
    assert environment_of(secret) == env
    assert hint(secret) == f"{prefix}...{secret[-4:]}"
    assert hash_secret(secret) != secret and len(hash_secret(secret)) == 64


def test_secrets_are_unique() -> None:
    assert len({generate_secret(Environment.LIVE) for _ in range(200)}) == 200


def _flip(secret: str, i: int) -> str:
    c = secret[i]
    return secret[:i] + ("A" if c != "A" else "B") + secret[i + 1 :]


GOOD = generate_secret(Environment.LIVE)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "svc_live_",
        GOOD[:-1],
        GOOD + "x",
        _flip(GOOD, 12),  # typo in the random part: checksum catches it
        _flip(GOOD, len(GOOD) - 1),  # typo in the checksum
        "svc_prod_" + GOOD[9:],
        "SVC_LIVE_" + GOOD[9:],
        GOOD[:20] + "-" + GOOD[21:],
        GOOD[:20] + "é" + GOOD[21:],
        "sk_live_" + GOOD[8:],
    ],
    # GOOD is random: ids of their own, the same in every pytest-xdist worker
    ids=[
        "empty",
        "prefix-only",
        "short",
        "long",
        "typo",
        "typo-in-checksum",
        "other-prefix",
        "upper-case",
        "dash",
        "non-ascii",
        "stripe-prefix",
    ],
)
def test_malformed_secrets_are_recognised_without_lookup(bad: str) -> None:
    assert environment_of(bad) is None


def test_scopes_validated_and_canonical() -> None:
    assert validate_scopes(["esim:read", "hotels:read", "esim:read"]) == ("hotels:read", "esim:read")
    assert validate_scopes([*reversed(ALL_SCOPES), *ALL_SCOPES]) == ALL_SCOPES


@pytest.mark.parametrize(
    "bad", ["hotels", "hotels:delete", "cars:read", "Hotels:read", " hotels:read", "*", ""]
)
def test_unknown_scopes_refused(bad: str) -> None:
    with pytest.raises(InvalidInput, match="scopes"):
        validate_scopes([bad])


def test_at_least_one_scope() -> None:
    with pytest.raises(InvalidInput, match="at least one"):
        validate_scopes([])


@pytest.mark.parametrize(
    ("entry", "stored"),
    [
        ("10.0.0.1", "10.0.0.1"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("2001:DB8::1", "2001:db8::1"),
        ("2001:db8::/32", "2001:db8::/32"),
        (" 192.0.2.0/24 ", "192.0.2.0/24"),
        ("0.0.0.0/0", "0.0.0.0/0"),
    ],
)
def test_allowlist_entries(entry: str, stored: str) -> None:
    assert validate_allowlist([entry]) == (stored,)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("10.0.0.1/24", "host bits set"),
        ("10.0.0.0/33", "not an IP address"),
        ("300.1.1.1", "not an IP address"),
        ("example.com", "not an IP address"),
        ("2001:db8::/129", "not an IP address"),
        ("", "not an IP address"),
        ("1" * 100, "not an IP address"),
    ],
)
def test_allowlist_bad_entries(entry: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        validate_allowlist([entry])


def test_allowlist_size_limit() -> None:
    ok = [f"10.0.{i}.0/24" for i in range(MAX_ENTRIES)]
    assert len(validate_allowlist(ok)) == MAX_ENTRIES
    with pytest.raises(InvalidInput, match=f"at most {MAX_ENTRIES}"):
        validate_allowlist([*ok, "192.0.2.1"])


@pytest.mark.parametrize("ref", ["cust_123", "A-9.8_7", "x", "7" * 64, "user@localhost", "a@b"])
def test_partner_ref_accepted(ref: str) -> None:
    assert partner_ref(ref) == ref


@pytest.mark.parametrize(
    "ref",
    [
        "",
        "a b",
        "tab\there",
        "line\n",
        "x" * 65,
        "jane@example.com",
        "Jane.Doe+trip@mail.example.co.uk",
        "naïve",
    ],
)
def test_partner_ref_refused(ref: str) -> None:
    with pytest.raises(InvalidCustomerRef):
        partner_ref(ref)


@pytest.mark.parametrize(
    ("allowance", "threshold"), [(1, 1), (5, 4), (10, 8), (100, 80), (101, 81), (10_000, 8000)]
)
def test_threshold_is_80_percent_rounded_up(allowance: int, threshold: int) -> None:
    assert threshold_of(allowance) == threshold


@pytest.mark.parametrize(
    ("attempts", "delay"), [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (50, 30.0)]
)
def test_outbox_backoff(attempts: int, delay: float) -> None:
    assert backoff(attempts, 0.5, 30.0) == delay


def _grant(key_id: str, account_id: str) -> KeyGrant:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    account = Account(account_id, "n", AccountMode.A, AccountStatus.ACTIVE, (), 1, now, now)
    key = ApiKey(key_id, account_id, Environment.LIVE, "", ("hotels:read",), (), "h", key_id, now)
    return KeyGrant.of(key, account)


def test_cache_invalidation() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    cache = KeyCache()
    for k, a in [("k1", "a1"), ("k2", "a1"), ("k3", "a2")]:
        cache.put(k, _grant(k, a), cache.generation)
    cache.invalidate(KeyChange("revoked", "k1", "a1", now))
    assert cache.get("k1") is None and cache.get("k2") is not None
    cache.invalidate(KeyChange("account_updated", "", "a1", now))
    assert cache.get("k2") is None and cache.get("k3") is not None
    cache.invalidate(KeyChange("sync", "", "", now))
    assert len(cache) == 0


def test_a_full_cache_evicts_its_least_recently_used_grant_only() -> None:
    """At max_entries one grant makes room (the one used least recently), not the whole cache: a flood of
    new keys never empties the cache of the keys in use (it was cleared wholesale before)."""
    cache = KeyCache(max_entries=3)
    for k in ("k1", "k2", "k3"):
        cache.put(k, _grant(k, "a1"), cache.generation)
    assert cache.get("k1") is not None  # k1 used: k2 is now the least recently used
    cache.put("k4", _grant("k4", "a1"), cache.generation)
    assert len(cache) == 3
    assert [k for k in ("k1", "k2", "k3", "k4") if cache.get(k) is None] == ["k2"]


def test_each_grant_ages_out_after_the_ttl_on_its_own() -> None:
    now = [100.0]
    cache = KeyCache(ttl=60.0, timer=lambda: now[0])
    cache.put("k1", _grant("k1", "a1"), cache.generation)
    now[0] = 130.0
    cache.put("k2", _grant("k2", "a1"), cache.generation)
    now[0] = 160.5  # k1 is 60.5 s old, k2 30.5 s
    assert cache.get("k1") is None and cache.get("k2") is not None
    now[0] = 190.5
    assert cache.get("k2") is None and len(cache) == 0
    assert (cache.hits, cache.misses) == (1, 2)


def test_cache_refuses_results_of_a_lookup_that_raced_an_invalidation() -> None:
    cache = KeyCache()
    generation = cache.generation
    cache.invalidate(KeyChange("revoked", "k1", "a1", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)))
    cache.put("k1", _grant("k1", "a1"), generation)
    assert cache.get("k1") is None

"""The edge's pure decisions, by table."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest

from edge.authcache import WATCH_GRACE, WATCH_SILENCE, Answer, AuthCache, CacheUse, Caller, cache_use, ttl_for
from edge.credentials import key_from_authorization, stream_credential
from edge.environments import Environment, HostMap, deprecation_headers, key_environment
from edge.exceptions import EdgeError
from edge.idempotency import request_hash
from edge.negotiation import accepts_json, check_customer_ref, check_idempotency_key, check_json_content_type
from edge.routetable import RouteTable, RouteTableError, parse_route
from edge.sources import list_entries, parse_networks, source_address
from edge.streamfilter import may_read, scopes_for_event, wanted
from svckit.apikeys import checksum
from svckit.clients.auth import RETRIED_METHODS
from svckit.clients.auth import auth_service_config as authsvc_service_config
from svckit.clients.auth import auth_target as authsvc_target
from svckit.errors import http_status


def well_formed(body: str) -> str:
    return body + checksum(body)


KEY = well_formed("svc_test_" + "A" * 32)
LIVE_KEY = well_formed("svc_live_" + "b1" * 16)
BAD_CHECKSUM = KEY[:-1] + ("x" if KEY[-1] != "x" else "y")


def error_type(fn, *args):
    with pytest.raises(EdgeError) as info:
        fn(*args)
    return info.value.type


# -- Host -> environment ---------------------------------------------------------------------------
HOSTS = HostMap(
    ["localhost:8080", "127.0.0.1:8080", "api.svc.example"], ["localhost:8081", "sandbox.svc.example"]
)


@pytest.mark.parametrize(
    ("host", "env"),
    [
        ("localhost:8080", Environment.LIVE),
        ("127.0.0.1:8080", Environment.LIVE),
        ("LOCALHOST:8080", Environment.LIVE),
        ("api.svc.example", Environment.LIVE),
        ("api.svc.example.", Environment.LIVE),
        ("localhost:8081", Environment.SANDBOX),
        ("Sandbox.Svc.Example", Environment.SANDBOX),
    ],
)
def test_environment_from_host(host: str, env: Environment) -> None:
    assert HOSTS.environment(host) is env


@pytest.mark.parametrize(
    "host", [None, "", "localhost", "localhost:9999", "evil.example", "api.svc.example:8443"]
)
def test_unknown_host_is_misdirected(host: str | None) -> None:
    assert error_type(HOSTS.environment, host) == "misdirected_request"
    assert http_status("misdirected_request") == 421


def test_host_in_both_environments_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="both"):
        HostMap(["a:1"], ["A:1"])


@pytest.mark.parametrize(
    ("key", "env"), [(KEY, Environment.SANDBOX), (LIVE_KEY, Environment.LIVE), ("sk_live_x", None)]
)
def test_key_environment_from_prefix(key: str, env: Environment | None) -> None:
    assert key_environment(key) is env


# -- credentials -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"Svc {KEY}", KEY),
        (f"svc {KEY}", KEY),
        (f"SVC   {KEY}  ", KEY),
        (f"Bearer {KEY}", KEY),
        (f"bearer {LIVE_KEY}", LIVE_KEY),
    ],
)
def test_authorization_header_ok(header: str, expected: str) -> None:
    assert key_from_authorization(header) == expected


@pytest.mark.parametrize(
    ("header", "etype"),
    [
        (None, "missing_api_key"),
        ("", "missing_api_key"),
        ("   ", "missing_api_key"),
        ("Svc", "missing_api_key"),
        ("Svc   ", "missing_api_key"),
        (f"Basic {KEY}", "invalid_api_key"),
        (KEY, "invalid_api_key"),
        ("Svc sk_live_abc", "invalid_api_key"),
        ("Svc svc_test_short", "invalid_api_key"),
        ("Svc svc_test_" + "a" * 30 + "!", "invalid_api_key"),
        # Well-shaped but the checksum does not match: refused here, authsvc is never asked.
        (f"Svc {BAD_CHECKSUM}", "invalid_api_key"),
        ("Svc svc_test_" + "A" * 38, "invalid_api_key"),
        (f"Svc {KEY}x", "invalid_api_key"),
        (f"Svc {KEY[:-1]}", "invalid_api_key"),
        (f"Svc {KEY.replace('svc_test_', 'svc_TEST_')}", "invalid_api_key"),
        (f"Svc {KEY} extra", "invalid_api_key"),
    ],
)
def test_authorization_header_refused(header: str | None, etype: str) -> None:
    assert error_type(key_from_authorization, header) == etype


@pytest.mark.parametrize(
    ("lines", "authorization", "expected"),
    [
        ([f"svc, {KEY}"], None, (KEY, "svc")),
        ([f"SVC,{KEY}"], None, (KEY, "SVC")),  # any case; the answer spells it as the client did
        ([f" Svc ,  {KEY} "], f"Svc {LIVE_KEY}", (KEY, "Svc")),  # the subprotocol wins
        (["svc", KEY], None, (KEY, "svc")),  # two field lines are one list, as the handshake reads them
        ([], f"Svc {KEY}", (KEY, None)),  # a server client: no subprotocol, none selected
        ([""], f"Bearer {KEY}", (KEY, None)),
        (["sVc"], f"Svc {KEY}", (KEY, "sVc")),  # "svc" alone: the key from Authorization
    ],
)
def test_stream_credential_ok(
    lines: list[str], authorization: str | None, expected: tuple[str, str | None]
) -> None:
    assert stream_credential(lines, authorization) == expected


@pytest.mark.parametrize(
    ("lines", "authorization", "etype"),
    [
        ([], None, "missing_api_key"),
        (["svc"], None, "missing_api_key"),
        (["svc"], "Svc", "missing_api_key"),
        (["chat"], f"Svc {KEY}", "invalid_request"),
        ([f"{KEY}, svc"], None, "invalid_request"),
        ([f"svc, {KEY}, other"], None, "invalid_request"),
        (["svc", KEY, "other"], None, "invalid_request"),
        (["svc, not-a-key"], None, "invalid_api_key"),
        ([f"svc, {BAD_CHECKSUM}"], None, "invalid_api_key"),
        ([], f"Svc {BAD_CHECKSUM}", "invalid_api_key"),
    ],
)
def test_stream_credential_refused(lines: list[str], authorization: str | None, etype: str) -> None:
    assert error_type(stream_credential, lines, authorization) == etype


# -- source address ----------------------------------------------------------------------------------
PROXIES = parse_networks(["10.0.0.0/8", "fd00::/8,192.0.2.1"])


@pytest.mark.parametrize(
    ("peer", "xff", "expected"),
    [
        ("203.0.113.5", [], "203.0.113.5"),
        ("203.0.113.5", ["1.2.3.4"], "203.0.113.5"),  # untrusted peer: header ignored
        ("10.1.1.1", [], "10.1.1.1"),
        ("10.1.1.1", ["198.51.100.7"], "198.51.100.7"),
        ("10.1.1.1", ["6.6.6.6, 198.51.100.7"], "198.51.100.7"),  # right-most untrusted entry
        ("10.1.1.1", ["6.6.6.6, 198.51.100.7, 10.2.2.2, 192.0.2.1"], "198.51.100.7"),
        ("10.1.1.1", ["10.9.9.9, 10.2.2.2"], "10.9.9.9"),  # all trusted: left-most
        ("fd00::1", ["2001:db8::5"], "2001:db8::5"),
        ("::ffff:10.0.0.2", ["198.51.100.8"], "198.51.100.8"),
        ("10.1.1.1", ["[2001:db8::9]:443"], "2001:db8::9"),
        ("10.1.1.1", ["198.51.100.7:5555"], "198.51.100.7"),
        # Several field lines are one list, in order (RFC 9110 §5.3): a proxy's own line comes last.
        ("10.1.1.1", ["10.1.2.3", "8.8.8.8"], "8.8.8.8"),
        ("10.1.1.1", ["6.6.6.6, 10.1.2.3", "8.8.8.8, 10.2.2.2"], "8.8.8.8"),
        ("10.1.1.1", ["198.51.100.7", "10.2.2.2"], "198.51.100.7"),
        ("10.1.1.1", ["198.51.100.7", ""], "198.51.100.7"),  # an empty line adds nothing
        ("10.1.1.1", ["", " , "], "10.1.1.1"),
    ],
)
def test_source_address(peer: str, xff: list[str], expected: str) -> None:
    assert source_address(peer, xff, PROXIES) == expected


@pytest.mark.parametrize(
    ("lines", "entries"),
    [
        ([], []),
        (["a"], ["a"]),
        (["a, b", "c"], ["a", "b", "c"]),
        ([" a ,,b ", "", "c,"], ["a", "b", "c"]),
    ],
)
def test_list_entries_joins_field_lines_in_order(lines: list[str], entries: list[str]) -> None:
    assert list_entries(lines) == entries


def test_source_address_without_proxies_is_the_peer() -> None:
    assert source_address("10.1.1.1", ["1.2.3.4"], ()) == "10.1.1.1"


@pytest.mark.parametrize(
    "xff", [["not-an-ip"], ["1.2.3.4, junk"], ["1.2.3.4, 10.0.0.1, ???"], ["1.2.3.4", "junk"]]
)
def test_malformed_forwarded_for_is_invalid_request(xff: list[str]) -> None:
    assert error_type(source_address, "10.1.1.1", xff, PROXIES) == "invalid_request"


def test_parse_networks() -> None:
    assert parse_networks(["10.0.0.0/8, 192.0.2.1"]) == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("192.0.2.1/32"),
    )


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


def test_request_hash_covers_method_path_and_body() -> None:
    base = request_hash("POST", "/v1/x", b"{}")
    assert base == request_hash("post", "/v1/x", b"{}")
    assert len({base, request_hash("POST", "/v1/y", b"{}"), request_hash("POST", "/v1/x", b"{ }")}) == 3


# -- Deprecation / Sunset ---------------------------------------------------------------------------------
def test_deprecation_headers_for_expiring_key() -> None:
    rotated = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    when = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    # Deprecation: when it was rotated out (RFC 9745); Sunset: when it stops working (RFC 8594).
    assert deprecation_headers(True, rotated, when) == {
        "Deprecation": f"@{int(rotated.timestamp())}",
        "Sunset": "Tue, 01 Dec 2026 12:00:00 GMT",
    }
    assert deprecation_headers(True, None, when) == {"Sunset": "Tue, 01 Dec 2026 12:00:00 GMT"}
    assert deprecation_headers(False, rotated, when) == {}
    assert deprecation_headers(True, rotated, None) == {}


# -- route table ----------------------------------------------------------------------------------------
UP = {"live": "https://live.internal", "sandbox": "https://sandbox.internal"}
TABLE = RouteTable.from_json(
    {
        "routes": [
            {
                "method": "GET",
                "path": "/v1/hotels/search",
                "scope": "hotels:read",
                "search": True,
                "upstream": UP,
            },
            {
                "method": "GET",
                "path": "/v1/hotels/bookings/{booking_id}",
                "scope": "hotels:read",
                "upstream": UP,
            },
            {"method": "GET", "path": "/v1/hotels/bookings/latest", "scope": "hotels:read", "upstream": UP},
            {"method": "POST", "path": "/v1/hotels/bookings", "scope": "hotels:write", "upstream": UP},
            {
                "method": "DELETE",
                "path": "/v1/flights/orders/{order_id}/items/{item_id}",
                "scope": "flights:write",
                "upstream": UP,
            },
        ]
    }
)


@pytest.mark.parametrize(
    ("method", "path", "pattern", "params"),
    [
        ("GET", "/v1/hotels/search", "/v1/hotels/search", {}),
        ("GET", "/v1/hotels/bookings/bk_1", "/v1/hotels/bookings/{booking_id}", {"booking_id": "bk_1"}),
        ("GET", "/v1/hotels/bookings/latest", "/v1/hotels/bookings/latest", {}),  # literal wins
        ("POST", "/v1/hotels/bookings", "/v1/hotels/bookings", {}),
        (
            "DELETE",
            "/v1/flights/orders/o1/items/i2",
            "/v1/flights/orders/{order_id}/items/{item_id}",
            {"order_id": "o1", "item_id": "i2"},
        ),
    ],
)
def test_route_table_match(method: str, path: str, pattern: str, params: dict[str, str]) -> None:
    match = TABLE.match(method, path)
    assert match is not None
    assert match[0].path == pattern
    assert match[1] == params


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/hotels/search"),
        ("GET", "/v1/hotels/search/"),
        ("GET", "/v1/hotels/bookings/a/b"),
        ("GET", "/v1/hotels"),
        ("GET", "/v1/esim/plans"),
    ],
)
def test_route_table_no_match(method: str, path: str) -> None:
    assert TABLE.match(method, path) is None


def test_route_flags() -> None:
    search = TABLE.match("GET", "/v1/hotels/search")
    book = TABLE.match("POST", "/v1/hotels/bookings")
    assert search and search[0].search and not search[0].is_write
    assert book and book[0].is_write and not book[0].search
    assert search[0].upstream[Environment.SANDBOX] == "https://sandbox.internal"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"method": "GET", "path": "/v2/x", "scope": "hotels:read", "upstream": UP}, "/v1/"),
        ({"method": "TRACE", "path": "/v1/x", "scope": "hotels:read", "upstream": UP}, "method"),
        ({"method": "GET", "path": "/v1/x", "scope": "hotels", "upstream": UP}, "scope"),
        ({"method": "GET", "path": "/v1/x", "scope": "cars:read", "upstream": UP}, "scope"),
        (
            {"method": "GET", "path": "/v1/x", "scope": "hotels:read", "upstream": {"live": UP["live"]}},
            "sandbox",
        ),
        (
            {
                "method": "GET",
                "path": "/v1/x",
                "scope": "hotels:read",
                "upstream": {"live": "https://a", "sandbox": "https://a"},
            },
            "differ",
        ),
        ({"method": "GET", "path": "/v1/{a}/{a}", "scope": "hotels:read", "upstream": UP}, "repeats"),
        ({"method": "GET", "path": "/v1/a b", "scope": "hotels:read", "upstream": UP}, "segment"),
        (
            {"method": "GET", "path": "/v1/x", "scope": "hotels:read", "upstream": UP, "traveller": "maybe"},
            "traveller",
        ),
        ({"path": "/v1/x"}, "lacks"),
    ],
)
def test_route_table_refuses_bad_routes(raw: dict[str, object], message: str) -> None:
    with pytest.raises(RouteTableError, match=message):
        parse_route(raw)


def test_route_table_refuses_duplicates() -> None:
    r = {"method": "GET", "path": "/v1/x/{a}", "scope": "hotels:read", "upstream": UP}
    with pytest.raises(RouteTableError, match="twice"):
        RouteTable.from_json([r, {**r, "path": "/v1/x/{b}"}])


# -- authorisation cache ----------------------------------------------------------------------------------
def caller(key_id: str = "key_1", account_id: str = "acct_1") -> Caller:
    return Caller(
        key_id=key_id,
        account_id=account_id,
        environment="live",
        scopes=("account:read",),
        key_status="active",
    )


def allow(key_id: str = "key_1", account_id: str = "acct_1") -> Answer:
    return Answer(True, caller=caller(key_id, account_id))


NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("answer_ttl", "expires_in", "expected"),
    [
        (30.0, None, 30.0),
        (600.0, None, 60.0),  # never more than 60 s
        (60.0, 10.0, 10.0),  # never past the key's expiry
        (60.0, -5.0, 0.0),
        (-1.0, None, 0.0),
        (0.0, 100.0, 0.0),
    ],
)
def test_ttl_for(answer_ttl: float, expires_in: float | None, expected: float) -> None:
    expires = NOW + dt.timedelta(seconds=expires_in) if expires_in is not None else None
    assert ttl_for(answer_ttl, expires, NOW) == expected


def test_cache_hit_and_expiry() -> None:
    cache = AuthCache()
    assert cache.put(("k",), allow(), 10, now=100.0, generation=cache.generation)
    assert cache.get(("k",), 109.9) == allow()
    assert cache.get(("k",), 110.0) is None
    assert len(cache) == 0


def test_cache_zero_ttl_is_not_stored() -> None:
    cache = AuthCache()
    assert not cache.put(("k",), allow(), 0, now=0.0, generation=cache.generation)
    assert cache.get(("k",), 0.0) is None


@pytest.mark.parametrize(
    ("drop", "survivors"),
    [
        (lambda c: c.drop_key("key_1"), {"b", "c"}),
        (lambda c: c.drop_key("key_2"), {"a", "a2", "c"}),
        (lambda c: c.drop_account("acct_1"), {"c"}),
        (lambda c: c.drop_account("acct_2"), {"a", "a2", "b"}),
        (lambda c: c.drop_key("key_unknown"), {"a", "a2", "b", "c"}),
        (lambda c: c.flush(), set()),
    ],
)
def test_cache_drops(drop, survivors: set[str]) -> None:
    cache = AuthCache()
    entries = {
        "a": allow("key_1", "acct_1"),
        "a2": allow("key_1", "acct_1"),  # same key, another scope
        "b": allow("key_2", "acct_1"),
        "c": allow("key_3", "acct_2"),
    }
    for name, answer in entries.items():
        cache.put((name,), answer, 60, 0.0, cache.generation)
    drop(cache)
    assert {n for n in entries if cache.get((n,), 1.0) is not None} == survivors


def test_answer_fetched_before_a_drop_is_not_stored_after_it() -> None:
    cache = AuthCache()
    generation = cache.generation  # a request starts asking authsvc...
    cache.drop_key("key_1")  # ...the key is revoked meanwhile...
    assert not cache.put(("k",), allow(), 60, 0.0, generation)  # ...and the stale ALLOW is dropped
    assert cache.get(("k",), 0.0) is None


def test_denials_without_a_key_are_cached_and_flushed() -> None:
    cache = AuthCache()
    deny = Answer(False, "invalid_api_key", "Invalid API key provided.")
    assert cache.put(("k",), deny, 60, 0.0, cache.generation)
    assert cache.get(("k",), 1.0) == deny
    cache.flush()
    assert cache.get(("k",), 1.0) is None


@pytest.mark.parametrize(
    ("down_since", "now", "expected"),
    [
        (None, 1000.0, CacheUse.FIRST),  # the watch is up (its SYNC arrived): the cache answers first
        (100.0, 100.0, CacheUse.FALLBACK),  # it just broke: ask authsvc, the cache if it cannot be reached
        (100.0, 100.0 + WATCH_GRACE, CacheUse.FALLBACK),
        (100.0, 100.0 + WATCH_GRACE + 0.001, CacheUse.NEVER),  # no watch for longer: fail closed
        (100.0, 101.0, CacheUse.NEVER),
        (100.0, 10_000.0, CacheUse.NEVER),
    ],
)
def test_cache_use(down_since: float | None, now: float, expected: CacheUse) -> None:
    assert cache_use(down_since, now) is expected


@pytest.mark.parametrize(
    ("down_since", "heard", "now", "expected"),
    [
        (None, None, 50.0, CacheUse.FIRST),  # an authsvc without heartbeats: only a break counts
        (None, 100.0, 100.0 + WATCH_SILENCE, CacheUse.FIRST),  # heard from recently enough
        (None, 100.0, 100.0 + WATCH_SILENCE + 0.01, CacheUse.FALLBACK),  # silent: as if broken then
        (None, 100.0, 100.0 + WATCH_SILENCE + WATCH_GRACE, CacheUse.FALLBACK),
        (None, 100.0, 100.0 + WATCH_SILENCE + WATCH_GRACE + 0.01, CacheUse.NEVER),
        (100.0, 99.9, 100.4, CacheUse.FALLBACK),  # broken before it went silent: the break counts
        (100.0, 99.9, 100.6, CacheUse.NEVER),
        (100.0, 99.0, 100.4, CacheUse.NEVER),  # silent since 99.5, then broken: the earlier counts
    ],
)
def test_cache_use_of_a_silent_watch(
    down_since: float | None, heard: float | None, now: float, expected: CacheUse
) -> None:
    assert cache_use(down_since, now, heard) is expected


def test_nothing_cached_is_served_a_second_after_the_watch_was_last_heard() -> None:
    assert WATCH_SILENCE + WATCH_GRACE <= 1.0


@pytest.mark.parametrize(
    ("addresses", "target"),
    [
        (["127.0.0.1:50051"], "127.0.0.1:50051"),
        (["authsvc.internal:50051"], "authsvc.internal:50051"),
        (["dns:///authsvc.internal:50051"], "dns:///authsvc.internal:50051"),  # a name resolving to several
        (["10.0.0.1:50051,10.0.0.2:50051"], "ipv4:10.0.0.1:50051,10.0.0.2:50051"),
        (["10.0.0.1:50051", " 10.0.0.2:50052 "], "ipv4:10.0.0.1:50051,10.0.0.2:50052"),  # repeated flag
        (["[::1]:1,[fd00::2]:2"], "ipv6:[::1]:1,[fd00::2]:2"),
        (["127.0.0.1:1,"], "127.0.0.1:1"),
    ],
)
def test_authsvc_target(addresses: list[str], target: str) -> None:
    assert authsvc_target(addresses) == target


@pytest.mark.parametrize(
    ("addresses", "message"),
    [
        ([], "no address"),
        ([" , "], "no address"),
        (["a.example:1,b.example:1"], "'a.example:1'"),  # names: one dns:/// target instead
        (["10.0.0.1:1,10.0.0.2"], "'10.0.0.2'"),
        (["10.0.0.1:1,10.0.0.2:99999"], "'10.0.0.2:99999'"),
        (["10.0.0.1:1,::1:2"], "'::1:2'"),
        (["10.0.0.1:1,[::1]:2"], "all be IPv4 or all IPv6"),
    ],
)
def test_authsvc_target_refuses(addresses: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        authsvc_target(addresses)


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], None, "127.0.0.1:50051"),
        ([], "10.0.0.1:1,10.0.0.2:2", "10.0.0.1:1,10.0.0.2:2"),  # EDGE_AUTHSVC, comma-separated
        (["--authsvc", "10.0.0.1:1", "--authsvc", "10.0.0.2:2"], "10.9.9.9:9", "10.0.0.1:1,10.0.0.2:2"),
        (["--authsvc", "10.0.0.1:1,10.0.0.2:2"], None, "10.0.0.1:1,10.0.0.2:2"),
    ],
)
def test_authsvc_flag_repeatable_with_env_fallback(
    argv: list[str], env: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge.__main__ import build_parser, config_from

    if env is not None:
        monkeypatch.setenv("EDGE_AUTHSVC", env)
    else:
        monkeypatch.delenv("EDGE_AUTHSVC", raising=False)
    assert config_from(build_parser().parse_args(["serve", "--insecure-dev", *argv])).authsvc == expected


def test_a_bad_authsvc_list_stops_the_start() -> None:
    from edge.__main__ import build_parser, config_from

    with pytest.raises(ValueError, match="several addresses"):
        config_from(
            build_parser().parse_args(["serve", "--authsvc", "a.example:1", "--authsvc", "b.example:1"])
        )


def test_authsvc_service_config_round_robin_and_safe_retries() -> None:
    import json

    config = json.loads(authsvc_service_config())
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    names = {n["method"] for n in config["methodConfig"][0]["name"]}
    assert names == set(RETRIED_METHODS) and "Authorize" in names
    assert "ConsumeSearch" not in names  # it counts: never run twice
    assert config["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]


def deny() -> Answer:
    return Answer(False, "invalid_api_key", "Invalid API key provided.")


def test_denials_of_unknown_keys_are_a_bounded_lru() -> None:
    cache = AuthCache(max_entries=10, max_denials=3)
    cache.put(("allow",), allow(), 60, 0.0, cache.generation)
    for i in range(1000):
        assert cache.put((f"d{i}",), deny(), 60, 0.0, cache.generation)
        assert cache.denials <= 3
    assert cache.denials == 3
    assert cache.get(("allow",), 1.0) == allow()  # a flood of denials never evicts an allow
    assert [n for n in ("d996", "d997", "d998", "d999") if cache.get((n,), 1.0)] == ["d997", "d998", "d999"]
    cache.get(("d997",), 1.0)  # used: now the most recent
    cache.put(("new",), deny(), 60, 1.0, cache.generation)
    assert cache.get(("d998",), 1.0) is None  # the least recently used went
    assert cache.get(("d997",), 1.0) == deny()
    assert len(cache) == 1 + 3


@pytest.mark.parametrize(
    ("max_denials", "held"),
    [(0, 0), (1, 1), (5, 5), (10_000, 50)],
)
def test_denial_cache_never_exceeds_its_bound(max_denials: int, held: int) -> None:
    cache = AuthCache(max_denials=max_denials)
    for i in range(50):
        cache.put((f"d{i}",), deny(), 60, 0.0, cache.generation)
    assert cache.denials == held


def test_denials_expire_and_drop_with_a_flush() -> None:
    cache = AuthCache(max_denials=3)
    cache.put(("d",), deny(), 5, 0.0, cache.generation)
    assert cache.get(("d",), 5.0) is None and cache.denials == 0
    cache.put(("d",), deny(), 5, 0.0, cache.generation)
    cache.flush()
    assert cache.denials == 0
    generation = cache.generation
    cache.drop_key("key_1")
    assert not cache.put(("d",), deny(), 5, 0.0, generation)  # fetched before a drop: not stored


def test_cache_is_bounded() -> None:
    cache = AuthCache(max_entries=2)
    cache.put(("a",), allow(), 1, 0.0, cache.generation)
    cache.put(("b",), allow(), 60, 0.0, cache.generation)
    assert cache.put(("c",), allow(), 60, 5.0, cache.generation)  # "a" expired and was evicted
    assert not cache.put(("d",), allow(), 60, 5.0, cache.generation)
    assert len(cache) == 2


# -- stream filter ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("event_type", "data", "scopes"),
    [
        ("booking.confirmed", {"product": "hotels"}, ("hotels:read",)),
        ("payment.refunded", {"product": "flights"}, ("flights:read",)),
        ("booking.failed", {}, ("hotels:read", "flights:read", "esim:read")),
        ("booking.failed", {"product": "cars"}, ("hotels:read", "flights:read", "esim:read")),
        ("esim.provisioned", {}, ("esim:read",)),
        ("ledger.low_balance", None, ("account:read",)),
        ("apikey.revoked", None, ("account:read",)),
        ("settlement.invoice_issued", None, ("account:read",)),
    ],
)
def test_scopes_for_event(event_type: str, data: dict[str, str] | None, scopes: tuple[str, ...]) -> None:
    assert scopes_for_event(event_type, data) == scopes


@pytest.mark.parametrize(
    ("scopes", "event_type", "data", "ok"),
    [
        (["hotels:read"], "booking.confirmed", {"product": "hotels"}, True),
        (["hotels:write"], "booking.confirmed", {"product": "hotels"}, False),
        (["flights:read"], "booking.confirmed", {"product": "hotels"}, False),
        (["account:read"], "booking.confirmed", {"product": "hotels"}, False),
        (["account:read"], "apikey.revoked", {}, True),
        (["hotels:read"], "apikey.revoked", {}, False),
        (["esim:read"], "esim.usage_threshold", {}, True),
    ],
)
def test_may_read(scopes: list[str], event_type: str, data: dict[str, str], ok: bool) -> None:
    assert may_read(scopes, event_type, data) is ok


@pytest.mark.parametrize(
    ("subscribed", "event_type", "ok"),
    [
        (None, "booking.confirmed", True),
        ([], "booking.confirmed", True),
        (["booking.confirmed"], "booking.confirmed", True),
        (["booking.*"], "booking.cancelled", True),
        (["booking.*"], "bookingx.y", False),
        (["payment.failed"], "booking.confirmed", False),
        (["*"], "ledger.low_balance", True),
    ],
)
def test_wanted(subscribed: list[str] | None, event_type: str, ok: bool) -> None:
    assert wanted(subscribed, event_type) is ok


def test_routes_example_file_is_the_built_in_default() -> None:
    import json
    import pathlib

    from edge.routetable import DEFAULT_ROUTES

    path = pathlib.Path(__file__).resolve().parents[2] / "edge" / "routes.example.json"
    assert json.loads(path.read_text()) == {"routes": DEFAULT_ROUTES}
    assert len(RouteTable.load(path).routes) == len(DEFAULT_ROUTES)

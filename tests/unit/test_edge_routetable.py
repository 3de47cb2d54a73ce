"""The product route table (edge.routetable), by table."""

from __future__ import annotations

import pytest

from edge.environments import Environment
from edge.routetable import RouteTable, RouteTableError, parse_route

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


def test_routes_example_file_is_the_built_in_default() -> None:
    import json
    import pathlib

    from edge.routetable import DEFAULT_ROUTES

    path = pathlib.Path(__file__).resolve().parents[2] / "edge" / "routes.example.json"
    assert json.loads(path.read_text()) == {"routes": DEFAULT_ROUTES}
    assert len(RouteTable.load(path).routes) == len(DEFAULT_ROUTES)

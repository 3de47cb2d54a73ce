"""Which content filters may be saved (svckit.filtercheck), by table: each refusal names its path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from svckit.filtercheck import MAX_BYTES, FilterError, filter_problem, parse_filter

GOOD: list[Any] = [
    {"type": "booking.confirmed"},
    {"data": {"product": {"$in": ["hotels", "flights"]}, "amount": {"$gte": 10000}}},
    {"$or": [{"type": "booking.failed"}, {"data": {"reason": {"$startsWith": "supplier_"}}}]},
    {"$not": {"data": {"customerRef": {"$exist": True}}}},
    {"data": {"changes": {"$neq": {"a": [1, 2]}}}},
    {"data": {"amount": {"$lt": {"$ref": "data.limit"}}}},
    {"type": {"$endsWith": [".cancelled", ".failed"]}, "createdAt": {"$gte": "2026-01-01"}},
    {"data": {"items": {"sku": "x", "$and": [{"qty": 1}]}}},
]

BAD: list[tuple[Any, str, str]] = [
    # (filter, path named, words of the message)
    ([], "filter", "JSON object"),
    ("booking.confirmed", "filter", "JSON object"),
    ({}, "filter", "empty"),
    ({"bookingId": "bk_1"}, "filter.bookingId", "no field 'bookingId'"),
    ({"data": {"x": {"$regex": "^a"}}}, "filter.data.x.$regex", "unknown operator $regex"),
    ({"$nor": [{"type": "a"}]}, "filter.$nor", "unknown operator $nor"),
    ({"data": {"n": {"$gt": [1, 2]}}}, "filter.data.n.$gt", "number or a string, not array"),
    ({"data": {"n": {"$in": [1, {"a": 1}]}}}, "filter.data.n.$in[1]", "not object"),
    ({"data": {"n": {"$in": True}}}, "filter.data.n.$in", "not boolean"),
    ({"data": {"s": {"$startsWith": 5}}}, "filter.data.s.$startsWith", "not number"),
    ({"data": {"s": {"$exist": "yes"}}}, "filter.data.s.$exist", "true or false"),
    ({"$or": []}, "filter.$or", "non-empty list"),
    ({"$and": {"type": "a"}}, "filter.$and", "non-empty list"),
    ({"$or": [{"typo": 1}]}, "filter.$or[0].typo", "no field"),
    ({"$not": {"data": {"a": {"$lte": None}}}}, "filter.$not.data.a.$lte", "not null"),
    ({"data": {"a": {"$ref": 3}}}, "filter.data.a.$ref", "field path"),
    ({"data": {"a": {"$ref": "data..b"}}}, "filter.data.a.$ref", "not a field path"),
    ({"data": {"n": {"$in": list(range(101))}}}, "filter.data.n.$in", "at most 100"),
    ({"data": {"s": "x" * 513}}, "filter.data.s", "at most 512"),
]


@pytest.mark.parametrize("flt", GOOD, ids=lambda f: json.dumps(f)[:60])
def test_good_filters_are_saved(flt: Any) -> None:
    assert filter_problem(flt) is None


@pytest.mark.parametrize(("flt", "path", "words"), BAD, ids=lambda v: json.dumps(v)[:60])
def test_bad_filters_name_the_path(flt: Any, path: str, words: str) -> None:
    problem = filter_problem(flt)
    assert problem is not None
    assert problem.path == path
    assert words in problem.message


def test_deep_nesting_is_refused() -> None:
    deep: Any = 1
    for _ in range(40):
        deep = {"a": deep}
    problem = filter_problem({"data": deep})
    assert problem is not None and "deeper than" in problem.message


def test_thousands_of_levels_are_refused_not_crashed() -> None:
    text = '{"data":' + '{"a":' * 3000 + "1" + "}" * 3001
    with pytest.raises(FilterError) as caught:
        parse_filter(text)
    assert caught.value.problem.path == "filter"


def test_size_is_bounded() -> None:
    flt = {"$or": [{"data": {"k": "v" * 400}} for _ in range(30)]}
    problem = filter_problem(flt)
    assert problem is not None and str(MAX_BYTES) in problem.message


def test_many_values_are_bounded() -> None:
    flt = {"$or": [{"data": {f"k{j}": j for j in range(9)}} for i in range(50)]}
    problem = filter_problem(flt)
    assert problem is not None and "more than 400 values" in problem.message


def test_parse() -> None:
    assert parse_filter("") is None
    assert parse_filter('{"type": "booking.confirmed"}') == {"type": "booking.confirmed"}
    with pytest.raises(FilterError) as caught:
        parse_filter("{not json")
    assert str(caught.value) == "filter: is not valid JSON"

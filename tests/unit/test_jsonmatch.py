"""Content filters (svckit.jsonmatch): the hookdeck/simple-json-match corpus as data, the documented
differences from the JavaScript library, and the evaluation bounds against hostile filters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from svckit import jsonmatch
from svckit.jsonmatch import document_of_envelope, matches, parse_path

CORPUS = json.loads(
    (Path(__file__).parent.parent / "data" / "simple_json_match" / "cases.json").read_text(encoding="utf-8")
)


def _id(case: dict[str, Any]) -> str:
    return json.dumps([case["input"], case["filter"]], separators=(",", ":"))[:90]


def test_the_corpus_is_whole() -> None:
    assert len(CORPUS["tests"]) == 121
    assert len(CORPUS["not_tests"]) == 12
    assert {c["match"] for c in CORPUS["tests"]} == {True, False}


@pytest.mark.parametrize("case", CORPUS["tests"], ids=_id)
def test_corpus_case(case: dict[str, Any]) -> None:
    assert matches(case["input"], case["filter"]) is case["match"]
    assert matches(case["input"], {"$not": case["filter"]}) is (not case["match"])


@pytest.mark.parametrize("case", CORPUS["not_tests"], ids=_id)
def test_corpus_not_case(case: dict[str, Any]) -> None:
    assert matches(case["input"], case["filter"]) is case["match"]


# The differences from the library, where JavaScript's loose typing would decide (docs/webhooks.md).
DIFFERENCES = [
    # (document, filter, ours, the library's)
    ({"n": 1}, {"n": "1"}, False, True),  # "1" == 1 in JavaScript
    ({"n": 1}, {"n": True}, False, True),  # true == 1
    ({"n": 10}, {"n": {"$gt": "9"}}, False, True),  # "9" converted to 9
    ({"o": {"a": 1, "b": 2}}, {"o": {"$eq": {"b": 2, "a": 1}}}, True, False),  # JSON.stringify order
]


@pytest.mark.parametrize(("doc", "flt", "ours", "theirs"), DIFFERENCES)
def test_documented_differences(doc: Any, flt: Any, ours: bool, theirs: bool) -> None:
    assert matches(doc, flt) is ours
    assert ours is not theirs


SAME = [
    ({"n": 1.0}, {"n": 1}, True),  # one number type, as in JSON
    ({"n": 1}, {"n": {"$in": [1, 2]}}, True),
    ({"n": True}, {"n": {"$in": [1, 2]}}, False),
    ({"s": "abc12"}, {"s": {"$in": 12}}, True),  # String(12) in "abc12", as the library
    ({"s": "b"}, {"s": {"$gte": "a", "$lt": "c"}}, True),
    ({"a": {"b": [{"c": "x"}]}}, {"a": {"b": {"c": {"$ref": "a.b[$index].c"}}}}, True),
    ({"a": 1}, {"a": {"$ref": "a..b"}}, False),  # not a path: no match, never an error
    ({"a": 1}, None, False),  # the library's TypeError on null
    ({}, {"a": {"$exist": False, "$eq": None}}, False),
]


@pytest.mark.parametrize(("doc", "flt", "expected"), SAME)
def test_edges(doc: Any, flt: Any, expected: bool) -> None:
    assert matches(doc, flt) is expected


def test_the_document_of_an_event() -> None:
    envelope = {
        "id": "evt_1",
        "type": "booking.confirmed",
        "created": "2026-06-01T12:00:00.000Z",
        "livemode": False,
        "account": "acct_1",
        "state": "confirmed",
        "data": {"booking": "bk_1", "product": "hotels"},
    }
    doc = document_of_envelope(envelope)
    assert doc == {
        "id": "evt_1",
        "type": "booking.confirmed",
        "createdAt": "2026-06-01T12:00:00.000Z",
        "data": {"booking": "bk_1", "product": "hotels"},
    }
    assert matches(doc, {"type": {"$startsWith": "booking."}, "data": {"product": {"$in": ["hotels"]}}})
    assert not matches(doc, {"account": "acct_1"})  # not a field of the document


@pytest.mark.parametrize(
    ("path", "steps"),
    [("a", ["a"]), ("a.b", ["a", "b"]), ("a[1].b", ["a", 1, "b"]), ("[0].b", [0, "b"]), ("$.a", ["a"])],
)
def test_paths(path: str, steps: list[str | int]) -> None:
    assert parse_path(path) == steps


@pytest.mark.parametrize("path", ["", "a.", "a..b", "a[x]", "a[1", "a[?(@.b)]", "a.*", "$..a"])
def test_bad_paths(path: str) -> None:
    with pytest.raises(ValueError):
        parse_path(path)


# Hostile filters that skipped the save-time check (svckit.filtercheck) still end: bounded work, no match.


def test_deep_nesting_ends_as_no_match() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = {"$not": {"$not": deep}}
    assert matches({"a": 1}, deep) is False


def test_the_step_budget_ends_a_costly_walk() -> None:
    # 200 alternatives, each walking 200 items: 40,000 steps, past the budget.
    doc = {"items": [{"k": i} for i in range(200)]}
    flt = {"$or": [{"items": {"k": {"$eq": -i}}} for i in range(1, 201)]}
    walk = jsonmatch._Walk()
    with pytest.raises(jsonmatch._Exhausted):
        walk.match(doc, flt, jsonmatch.MISSING, ())
    assert walk.steps == jsonmatch.MAX_STEPS + 1
    assert matches(doc, flt) is False
    # The same filter with a match within budget answers.
    assert matches(doc, {"$or": [{"items": {"k": 3}}]}) is True


def test_a_huge_in_list_is_one_step() -> None:
    flt = {"n": {"$in": list(range(100_000))}}
    walk = jsonmatch._Walk()
    assert walk.match({"n": 99_999}, flt, jsonmatch.MISSING, ())
    assert walk.steps < 5


def test_one_budget_bounds_all_the_filters_of_a_publish() -> None:
    """An account's 16 endpoints each with a filter just under the per-filter bound would cost a publish
    16 times one filter's work; a shared budget (webhookd's Passes) caps the whole at one filter's."""
    doc = {"items": [{"k": i} for i in range(20)]}
    costly = {"$or": [{"items": {"k": {"$eq": -i}}} for i in range(1, 20)]}
    walk = jsonmatch._Walk()
    assert walk.match(doc, {"$or": costly["$or"]}, jsonmatch.MISSING, ()) is False
    one = walk.steps
    assert one < jsonmatch.MAX_STEPS  # each filter alone is within the per-filter bound
    budget = jsonmatch.StepBudget()
    answers = [matches(doc, {"$or": [*costly["$or"], {"items": {"k": 5}}]}, budget) for _ in range(16)]
    spent_all = jsonmatch.MAX_STEPS // (one + 1)
    assert answers[0] is True and all(answers[: max(1, spent_all - 1)])
    assert answers[-1] is False and budget.left == 0
    # Without a shared budget every one answers (the bound is per filter only).
    assert all(matches(doc, {"$or": [*costly["$or"], {"items": {"k": 5}}]}) for _ in range(16))

"""The resource table (svckit.resources) and everything derived from it: the scopes, the route scopes, the
products, authsvc's read-only rule, and the docs' scope table (scripts/gen_scope_docs.py). Properties of
the table, not counts: a row added to it passes these unchanged."""

from __future__ import annotations

import pytest

from authsvc._decision import business_write
from svckit import resources
from svckit.resources import ALL_SCOPES, BY_NAME, PRODUCTS, ROUTE_SCOPES, TABLE, Resource
from svckit.scopes import validate_scopes
from svckit.vocabulary import AccountMode
from tests.support import ROOT, script


def docs_rows() -> dict[str, str]:
    """The generated scope table of docs/authentication.md: resource -> its row."""
    text = (ROOT / "docs" / "authentication.md").read_text()
    gen = script("gen_scope_docs")
    part = text[text.index(gen.BEGIN) : text.index(gen.END)]
    return {line.split("|")[1].strip(" `"): line for line in part.splitlines() if line.startswith("| `")}


def test_docs_scope_table_is_generated_from_the_resource_table() -> None:
    text = (ROOT / "docs" / "authentication.md").read_text()
    assert script("gen_scope_docs").render(text) == text, (
        "docs/authentication.md is stale: run `python scripts/gen_scope_docs.py`"
    )


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_every_scope_is_in_the_docs_table(scope: str) -> None:
    resource = scope.split(":", 1)[0]
    assert f"`{scope}`" in docs_rows()[resource]


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_every_scope_is_a_resource_and_one_of_its_actions(scope: str) -> None:
    name, action = scope.split(":")
    assert action in BY_NAME[name].actions
    assert validate_scopes([scope]) == (scope,)
    assert ALL_SCOPES.count(scope) == 1


def test_scopes_are_exactly_each_resources_actions_in_table_order() -> None:
    assert list(ALL_SCOPES) == [f"{r.name}:{a}" for r in TABLE for a in r.actions]
    assert validate_scopes(reversed(ALL_SCOPES)) == ALL_SCOPES


def test_a_read_only_resource_brings_no_write_scope() -> None:
    loyalty = Resource("loyalty", "loyalty points", actions=("read",))
    assert loyalty.scopes == ("loyalty:read",)
    with pytest.raises(ValueError, match="actions"):
        Resource("loyalty", "loyalty points", actions=("read", "delete"))
    with pytest.raises(ValueError, match="subject"):
        Resource("trains", "train search", product=True)


@pytest.mark.parametrize("resource", TABLE, ids=lambda r: r.name)
def test_route_scopes_and_products_follow_the_table(resource: Resource) -> None:
    assert (resource.name in PRODUCTS) is resource.product
    for scope in resource.scopes:
        assert (scope in ROUTE_SCOPES) is (resource.product or resource.on_routes)
    assert f"{resource.name}:read" in docs_rows()[resource.name] or "read" not in resource.actions


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_the_read_only_rule_is_the_tables(scope: str) -> None:
    """authsvc's business_write refuses a write of every resource the table does not mark writable when
    read-only, and only those; a read is never business."""
    resource = BY_NAME[scope.split(":", 1)[0]]
    assert business_write(scope, True) is not resource.writable_when_read_only
    assert business_write(scope, False) is False
    assert (scope in resources.BUSINESS_WRITE_SCOPES) is (
        scope.endswith(":write") and business_write(scope, True)
    )
    # The docs say which, and why when allowed.
    row = docs_rows()[resource.name]
    if "write" not in resource.actions:
        assert "(no writes)" in row
    elif resource.writable_when_read_only:
        assert "allowed: " + resource.why_writable in row
    else:
        assert "refused" in row


@pytest.mark.parametrize("stored", ["A", "B", "a", "b"])
def test_account_mode_has_one_spelling(stored: str) -> None:
    """The API's and the catalog's "A"/"B"; a row stored before reads as the same member."""
    mode = AccountMode(stored)
    assert mode.value == stored.upper() and mode.value in ("A", "B")
    with pytest.raises(ValueError):
        AccountMode("c")

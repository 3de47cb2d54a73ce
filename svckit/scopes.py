"""Scopes ``<resource>:<action>`` over closed lists (spec §5 "Scopes")."""

from __future__ import annotations

from collections.abc import Iterable

from svckit.errors import InvalidInput
from svckit.logs import redact

# The one list of scopes: adding a scope means adding its resource here (docs/architecture.md).
PRODUCTS = ("hotels", "flights", "esim")
RESOURCES = (*PRODUCTS, "account", "webhooks")
# What a product route of the edge's route table may require: a product's scope, or the account's.
ROUTE_RESOURCES = (*PRODUCTS, "account")
ACTIONS = ("read", "write")
ALL_SCOPES: tuple[str, ...] = tuple(f"{r}:{a}" for r in RESOURCES for a in ACTIONS)
ROUTE_SCOPES: frozenset[str] = frozenset(f"{r}:{a}" for r in ROUTE_RESOURCES for a in ACTIONS)
_ALL = frozenset(ALL_SCOPES)


def is_scope(value: str) -> bool:
    return value in _ALL


def validate_scopes(values: Iterable[str], field: str = "scopes") -> tuple[str, ...]:
    """Known scopes, de-duplicated, in canonical order; at least one. Raises InvalidInput."""
    seen: set[str] = set()
    for value in values:
        if value not in _ALL:
            shown = redact(value if len(value) <= 40 else value[:40] + "...")
            raise InvalidInput(
                f"{field}: unknown scope {shown!r}; scopes are <resource>:<action> with resource in "
                f"{', '.join(RESOURCES)} and action in {', '.join(ACTIONS)}"
            )
        seen.add(value)
    if not seen:
        raise InvalidInput(f"{field}: at least one scope is required")
    return tuple(s for s in ALL_SCOPES if s in seen)

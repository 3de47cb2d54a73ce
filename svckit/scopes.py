"""Scopes ``<resource>:<action>`` (spec §5 "Scopes"): the closed list derived from the resource table
(``svckit.resources``, the one place a resource and its actions are written), and its validation."""

from __future__ import annotations

from collections.abc import Iterable

from svckit.errors import InvalidInput
from svckit.logs import redact
from svckit.resources import ACTIONS, ALL_SCOPES, PRODUCTS, RESOURCES, ROUTE_RESOURCES, ROUTE_SCOPES

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
                f"{field}: unknown scope {shown!r}; scopes are <resource>:<action>, one of "
                f"{', '.join(ALL_SCOPES)}"
            )
        seen.add(value)
    if not seen:
        raise InvalidInput(f"{field}: at least one scope is required")
    return tuple(s for s in ALL_SCOPES if s in seen)


__all__ = [
    "ACTIONS",
    "ALL_SCOPES",
    "PRODUCTS",
    "RESOURCES",
    "ROUTE_RESOURCES",
    "ROUTE_SCOPES",
    "is_scope",
    "validate_scopes",
]

"""Scopes ``<resource>:<action>`` over closed lists (spec §5 "Scopes")."""

from __future__ import annotations

from collections.abc import Iterable

from authsvc._errors import InvalidRequest
from svckit.logs import redact

RESOURCES = ("hotels", "flights", "esim", "account", "webhooks")
ACTIONS = ("read", "write")
ALL_SCOPES: tuple[str, ...] = tuple(f"{r}:{a}" for r in RESOURCES for a in ACTIONS)
_ALL = frozenset(ALL_SCOPES)
MAX_SCOPES = len(ALL_SCOPES)


def is_scope(value: str) -> bool:
    return value in _ALL


def validate_scopes(values: Iterable[str], field: str = "scopes") -> tuple[str, ...]:
    """Known scopes, de-duplicated, in canonical order; at least one. Raises InvalidRequest."""
    seen: set[str] = set()
    for value in values:
        if value not in _ALL:
            shown = redact(value if len(value) <= 40 else value[:40] + "...")
            raise InvalidRequest(
                f"{field}: unknown scope {shown!r}; scopes are <resource>:<action> with resource in "
                f"{', '.join(RESOURCES)} and action in {', '.join(ACTIONS)}"
            )
        seen.add(value)
    if not seen:
        raise InvalidRequest(f"{field}: at least one scope is required")
    return tuple(s for s in ALL_SCOPES if s in seen)

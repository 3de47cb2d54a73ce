"""Which methods a path answers, for 405 method_not_allowed and its ``Allow`` header (RFC 9110 §15.5.6).

A path some route matches (a fixed route of the blueprints, or a product route of the route table) asked
with a method none of them has is 405 with ``Allow``; a path no route matches stays 404 not_found. The
product routes share one catch-all Sanic route, so for those the route table itself is asked. Every GET
route answers HEAD too (Sanic), so HEAD is listed with GET.
"""

from __future__ import annotations

from typing import Any

from sanic.exceptions import MethodNotAllowed, NotFound

from edge.routetable import RouteTable

# The methods a route of this edge can have (the product routes: edge.routetable.METHODS).
CANDIDATES = ("GET", "POST", "PUT", "PATCH", "DELETE")
CATCH_ALL = "v1/<rest:path>"


def allowed_methods(router: Any, table: RouteTable, path: str) -> list[str]:
    """The methods ``path`` answers, sorted, HEAD with GET; empty: no route matches the path."""
    found: set[str] = set()
    for method in CANDIDATES:
        try:
            route = router.get(path, method, None)[0]
        except (NotFound, MethodNotAllowed):
            continue
        if route.path != CATCH_ALL:
            found.add(method)
    found.update(table.methods_for(path))
    if "GET" in found:
        found.add("HEAD")
    return sorted(found)

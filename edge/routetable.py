"""Product routes (hotels, flights, esim) from configuration: method, path pattern, required scope,
whether it is a search, and the upstream base URL per environment. Pure."""

from __future__ import annotations

import functools
import json
import pathlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from edge.environments import Environment
from edge.triggers import RouteKind
from svckit.resources import BOOKING_PRODUCTS, ROUTE_RESOURCES, ROUTE_SCOPES

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
_PARAM = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")
TRAVELLER_MODES = {"none", "optional", "required"}
# A sandbox upstream of "builtin" is the edge's own product simulator (edge.simulator); never live.
BUILTIN = "builtin"


def _builtin_shapes() -> dict[tuple[str, str], str]:
    """(method, path with parameters as {}) -> what the built-in simulator does there."""
    shapes: dict[tuple[str, str], str] = {}
    for product in BOOKING_PRODUCTS:
        base = f"/v1/{product}"
        shapes[("GET", f"{base}/search")] = "search"
        shapes[("GET", f"{base}/offers/{{}}")] = "offer"
        shapes[("POST", f"{base}/bookings")] = "create"
        shapes[("GET", f"{base}/bookings/{{}}")] = "get"
        shapes[("POST", f"{base}/bookings/{{}}/modify")] = "modify"
        shapes[("POST", f"{base}/bookings/{{}}/cancel")] = "cancel"
    shapes[("GET", "/v1/esim/plans")] = "plans"
    shapes[("POST", "/v1/esim/orders")] = "create"
    shapes[("GET", "/v1/esim/orders/{}")] = "get"
    shapes[("GET", "/v1/esim/orders/{}/usage")] = "usage"
    return shapes


BUILTIN_SHAPES = _builtin_shapes()


class RouteTableError(ValueError):
    pass


_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
DOT_SEGMENTS = {".", ".."}


def path_problem(path: str) -> str | None:
    r"""Why a request path may not be matched against the product routes, or None.

    The path matched must be the path the upstream receives. Clients and servers remove dot segments
    (RFC 3986 5.2.4: httpx turns ``/v1/hotels/bookings/..`` into ``/v1/hotels``), some also when
    percent-encoded (``%2e%2e``) or followed by path parameters (``..;``), and some decode ``%2F``/``%5C``
    or read ``\`` as a separator; any of these would match one route here and reach another there.
    """
    if "\\" in path:
        return "a backslash"
    if _ENCODED_SEPARATOR.search(path):
        return "an encoded slash (%2F or %5C)"
    for segment in path.split("/"):
        if unquote(segment.split(";", 1)[0]) in DOT_SEGMENTS:
            return "a dot segment (. or ..)"
    return None


@dataclass(frozen=True)
class ProductRoute:
    method: str
    path: str
    scope: str
    upstream: Mapping[Environment, str]
    search: bool = False
    # Booking or order creation: where the sandbox's creation triggers apply.
    creates: bool = False
    traveller: str = "optional"
    summary: str = ""
    params: tuple[str, ...] = field(default=())
    regex: re.Pattern[str] = field(default=re.compile(""), compare=False)

    @functools.cached_property
    def builtin_action(self) -> str:
        """What the built-in simulator does on this route ("" when the sandbox upstream is a URL); worked
        out on first use and kept, as every product request asks."""
        if self.upstream[Environment.SANDBOX] != BUILTIN:
            return ""
        return BUILTIN_SHAPES[(self.method, _PARAM.sub("{}", self.path))]

    @property
    def is_write(self) -> bool:
        return self.scope.endswith(":write")

    @property
    def kind(self) -> RouteKind:
        if self.search:
            return RouteKind.SEARCH
        return RouteKind.CREATE if self.creates else RouteKind.OTHER


def _compile(path: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    if not path.startswith("/v1/"):
        raise RouteTableError(f"route path {path!r} must start with /v1/")
    names: list[str] = []
    parts: list[str] = []
    for segment in path.split("/")[1:]:
        m = _PARAM.fullmatch(segment)
        if m:
            if m.group(1) in names:
                raise RouteTableError(f"route path {path!r} repeats parameter {m.group(1)!r}")
            names.append(m.group(1))
            parts.append(f"(?P<{m.group(1)}>[^/]+)")
        elif _SEGMENT.fullmatch(segment) and segment not in DOT_SEGMENTS:
            parts.append(re.escape(segment))
        else:
            raise RouteTableError(f"route path {path!r} has an invalid segment {segment!r}")
    return re.compile("/" + "/".join(parts)), tuple(names)


def parse_route(raw: Mapping[str, Any]) -> ProductRoute:
    try:
        method = str(raw["method"]).upper()
        path = str(raw["path"])
        scope = str(raw["scope"])
        upstream_raw = raw["upstream"]
    except (KeyError, TypeError) as exc:
        raise RouteTableError(f"route {raw!r} lacks {exc}") from None
    if method not in METHODS:
        raise RouteTableError(f"route {path!r}: method {method!r} is not one of {sorted(METHODS)}")
    if scope not in ROUTE_SCOPES:
        raise RouteTableError(
            f"route {path!r}: scope {scope!r} is not a scope of {', '.join(ROUTE_RESOURCES)}: "
            f"one of {', '.join(sorted(ROUTE_SCOPES))}"
        )
    if not isinstance(upstream_raw, Mapping):
        raise RouteTableError(f"route {path!r}: upstream must map live/sandbox to base URLs")
    upstream: dict[Environment, str] = {}
    for env in Environment:
        url = upstream_raw.get(env.value)
        if env is Environment.SANDBOX and url == BUILTIN:
            if (method, _PARAM.sub("{}", path)) not in BUILTIN_SHAPES:
                known = ", ".join(f"{m} {p}" for m, p in BUILTIN_SHAPES)
                raise RouteTableError(
                    f"route {method} {path}: the builtin sandbox simulator does not answer it; "
                    f"it answers {known}"
                )
            upstream[env] = url
            continue
        if not isinstance(url, str) or not re.match(r"https?://", url):
            hint = ' or "builtin"' if env is Environment.SANDBOX else ' ("builtin" is sandbox only)'
            raise RouteTableError(f"route {path!r}: upstream.{env.value} must be an http(s) base URL{hint}")
        upstream[env] = url.rstrip("/")
    if upstream[Environment.LIVE] == upstream[Environment.SANDBOX]:
        # The sandbox must never reach a live upstream.
        raise RouteTableError(f"route {path!r}: the sandbox upstream must differ from the live one")
    traveller = str(raw.get("traveller", "optional"))
    if traveller not in TRAVELLER_MODES:
        raise RouteTableError(f"route {path!r}: traveller must be one of {sorted(TRAVELLER_MODES)}")
    regex, params = _compile(path)
    return ProductRoute(
        method=method,
        path=path,
        scope=scope,
        upstream=upstream,
        search=bool(raw.get("search", False)),
        creates=bool(raw.get("creates", False)),
        traveller=traveller,
        summary=str(raw.get("summary", "")),
        params=params,
        regex=regex,
    )


class RouteTable:
    def __init__(self, routes: Iterable[ProductRoute]) -> None:
        self.routes = list(routes)
        seen: set[tuple[str, str]] = set()
        for r in self.routes:
            shape = (r.method, _PARAM.sub("{}", r.path))
            if shape in seen:
                raise RouteTableError(f"route {r.method} {r.path} is defined twice")
            seen.add(shape)
        # Literal segments win over parameters: most literal characters first.
        self._ordered = sorted(self.routes, key=lambda r: -len(_PARAM.sub("", r.path)))

    @classmethod
    def from_json(cls, data: Any) -> RouteTable:
        if isinstance(data, Mapping):
            data = data.get("routes")
        if not isinstance(data, list):
            raise RouteTableError('the route table must be a list of routes or {"routes": [...]}')
        return cls(parse_route(r) for r in data)

    @classmethod
    def load(cls, path: str | pathlib.Path) -> RouteTable:
        try:
            data = json.loads(pathlib.Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise RouteTableError(f"cannot read route table {path}: {exc}") from None
        return cls.from_json(data)

    def match(self, method: str, path: str) -> tuple[ProductRoute, dict[str, str]] | None:
        for route in self._ordered:
            if route.method != method:
                continue
            m = route.regex.fullmatch(path)
            if m:
                return route, m.groupdict()
        return None

    def methods_for(self, path: str) -> list[str]:
        return sorted({r.method for r in self.routes if r.regex.fullmatch(path)})


_LIVE = {
    "hotels": "https://127.0.0.1:9201",
    "flights": "https://127.0.0.1:9202",
    "esim": "https://127.0.0.1:9203",
}


def _default_routes() -> list[dict[str, Any]]:
    """Every route the simulator answers; live upstreams are placeholders for a deployment's own table."""
    summaries = {
        "search": "Search {p} offers",
        "offer": "Retrieve a {p} offer",
        "create": "Book a {p} offer",
        "get": "Retrieve a {p} booking",
        "modify": "Modify a {p} booking",
        "cancel": "Cancel a {p} booking",
        "plans": "List eSIM plans",
        "usage": "Data usage of an eSIM order",
    }
    routes: list[dict[str, Any]] = []
    for (method, shape), action in BUILTIN_SHAPES.items():
        product = shape.split("/")[2]
        names = iter(
            ["offer_id"] if action == "offer" else ["order_id" if product == "esim" else "booking_id"]
        )
        path = "/".join(f"{{{next(names)}}}" if seg == "{}" else seg for seg in shape.split("/"))
        resource = "eSIM" if product == "esim" else product.removesuffix("s")
        summary = summaries[action].format(p=resource)
        if product == "esim" and action in ("create", "get"):
            summary = "Order an eSIM plan" if action == "create" else "Retrieve an eSIM order"
        route: dict[str, Any] = {
            "method": method,
            "path": path,
            "scope": f"{product}:{'write' if method == 'POST' else 'read'}",
            "summary": summary,
            "upstream": {"live": _LIVE[product], "sandbox": BUILTIN},
        }
        if action == "search":
            route["search"] = True
        if action == "create":
            route["creates"] = True
        route["traveller"] = "required" if action == "create" else "optional"
        routes.append(route)
    return routes


DEFAULT_ROUTES: list[dict[str, Any]] = _default_routes()

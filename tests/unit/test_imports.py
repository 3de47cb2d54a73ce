"""Who may import whom. The front-ends (``svc``, the partner's CLI; ``svcctl``, the operators'; the portal)
import no service package: what they share with a service lives in svckit. No service imports another.
No two project modules import each other, directly or round a longer cycle.

svckit's modules are filed in rooms (svckit/rooms.py): none imports a room above its own, and the bottom
two, the client distribution, import no library it does not declare.

The runtime checks import in a fresh interpreter and read ``sys.modules``; the static ones read every
``import`` and ``from ... import`` statement of the project's modules (at module level or inside a
function, since a lazy import is an import all the same), so a dependency hidden in a command that a
test never runs is still seen.
"""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
from collections.abc import Iterable, Iterator

import pytest

from svckit import rooms
from tests.support import script

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


packaging = script("package_assembly")  # what both package builds share

SERVICES = ("authsvc", "webhookd", "edge")
FRONT_ENDS = ("svccli", "svcctl", "portal")
PACKAGES = ("svckit", *SERVICES, *FRONT_ENDS)  # the project's own code (travel/ is generated)


# -- at runtime ------------------------------------------------------------------------------------------
def loaded_after(*modules: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after importing ``modules``."""
    code = "; ".join(
        [*(f"import {m}" for m in modules), "import json, sys", "print(json.dumps(sorted(sys.modules)))"]
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"importing {', '.join(modules)} failed:\n{done.stderr}"
    return set(json.loads(done.stdout.splitlines()[-1]))


def within(modules: Iterable[str], packages: Iterable[str]) -> list[str]:
    """The modules of ``modules`` that are one of ``packages`` or inside one."""
    tops = set(packages)
    return sorted(m for m in modules if m.split(".")[0] in tops)


def test_svc_cli_loads_no_server_nor_their_libraries() -> None:
    loaded = loaded_after("svccli.__main__")
    assert within(loaded, (*SERVICES, "sanic", "sqlalchemy")) == []
    assert "svckit.signing" in loaded and "svckit.events" in loaded  # what it does use


@pytest.mark.parametrize(
    "modules", [("svckit.clients",), ("examples.product_hotels",)], ids=["svckit.clients", "example"]
)
def test_the_client_library_loads_no_server_code(modules: tuple[str, ...]) -> None:
    """What a product team imports (docs/product-services.md): the clients and svckit.tls, no server."""
    loaded = loaded_after(*modules)
    servers = ("sanic", "sqlalchemy", "alembic", "redis", "opentelemetry", "prometheus_client")
    assert within(loaded, (*SERVICES, "portal", *servers)) == []
    assert {"svckit.clients", "svckit.tls"} <= loaded
    # Only what the client distribution carries (svckit/rooms.py).
    assert [m for m in within(loaded, ("svckit",)) if rooms.ROOM_OF[m] not in rooms.CLIENT_ROOMS] == []


@pytest.mark.parametrize(
    "modules", [("portal.app", "portal.__main__"), ("svcctl.__main__",)], ids=["portal", "svcctl"]
)
def test_front_end_loads_no_service(modules: tuple[str, ...]) -> None:
    assert within(loaded_after(*modules), SERVICES) == []


# Libraries a service imports only when its configuration uses them (Redis for the edge's shared limits,
# the brokers' clients for webhookd's AMQP and NATS endpoints): each costs every start about 0.1 s.
ON_DEMAND = ("redis", "aio_pika", "aiormq", "nats")


@pytest.mark.parametrize("main", ["authsvc._server", "webhookd._server", "edge.__main__", "portal.__main__"])
def test_a_service_starts_without_the_libraries_only_its_configuration_may_need(main: str) -> None:
    loaded = loaded_after(main, "svckit.outage")  # the service's main module, without running it
    assert within(loaded, ON_DEMAND) == []


def importable_modules(package: str) -> list[str]:
    """Every module of ``package`` that can be imported without side effects: not ``__main__`` (it runs
    the service) nor Alembic's migration environment (it runs migrations)."""
    return sorted(m for m in modules_of(package) if not m.endswith(".__main__") and ".migrations" not in m)


@pytest.mark.parametrize("service", SERVICES)
def test_service_loads_no_other_service(service: str) -> None:
    others = [s for s in SERVICES if s != service]
    assert within(loaded_after(*importable_modules(service)), others) == []


# -- statically ------------------------------------------------------------------------------------------
def modules_of(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


def source_of(module: str) -> pathlib.Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imported_names(module: str) -> Iterator[str]:
    """Every module name ``module`` imports, at any level of its code: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a.b`` (the submodule, or a name of ``a``: the caller resolves)."""
    tree = ast.parse(source_of(module).read_text(), str(source_of(module)))
    is_package = source_of(module).name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".")
                anchor = here[: len(here) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (``from pkg import name`` counts as importing
    the submodule ``pkg.name`` when there is one, else ``pkg`` itself)."""
    known = {m for p in PACKAGES for m in modules_of(p)}
    graph: dict[str, set[str]] = {}
    for module in sorted(known):
        targets = set()
        for name in imported_names(module):
            if name in known:
                targets.add(name)
        # "from pkg import sub" yields both "pkg" and "pkg.sub": the submodule is what is imported.
        targets -= {t for t in targets if any(o.startswith(t + ".") for o in targets)}
        graph[module] = targets - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_static_graph_sees_lazy_imports() -> None:
    graph = import_graph()
    assert "svccli.listen" in graph["svccli.__main__"]  # imported inside cmd_listen
    assert "svckit.signing" in graph["svccli.listen"]


@pytest.mark.parametrize("package", [*FRONT_ENDS, "svckit"])
def test_front_ends_and_svckit_import_no_service_anywhere(package: str) -> None:
    graph = import_graph()
    wrong = {m: sorted(within(graph[m], SERVICES)) for m in modules_of(package) if within(graph[m], SERVICES)}
    assert wrong == {}


@pytest.mark.parametrize("service", SERVICES)
def test_services_import_no_other_service_anywhere(service: str) -> None:
    graph = import_graph()
    others = [s for s in SERVICES if s != service]
    wrong = {m: sorted(within(graph[m], others)) for m in modules_of(service) if within(graph[m], others)}
    assert wrong == {}


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


# -- svckit's rooms (svckit/rooms.py) ---------------------------------------------------------------------
def test_every_svckit_module_is_in_exactly_one_room() -> None:
    """A new svckit module must be filed in one room before it lands."""
    filed = [n if n == "svckit" else f"svckit.{n}" for names in rooms.BY_ROOM.values() for n in names]
    assert sorted(set(filed)) == sorted(filed), "a module is filed in two rooms (or twice)"
    assert set(rooms.BY_ROOM) == set(rooms.ROOMS)
    assert sorted(modules_of("svckit")) == sorted(rooms.ROOM_OF)


def room_breaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """svckit module -> the svckit modules it imports from a room above its own (each as ``module
    (room)``)."""
    found: dict[str, list[str]] = {}
    for module, targets in sorted(graph.items()):
        if module not in rooms.ROOM_OF:
            continue
        above = sorted(
            f"{t} ({rooms.ROOM_OF[t]})"
            for t in targets
            if t in rooms.ROOM_OF and not rooms.may_import(module, t)
        )
        if above:
            found[f"{module} ({rooms.ROOM_OF[module]})"] = above
    return found


def test_no_svckit_module_imports_a_room_above_its_own() -> None:
    assert room_breaches(import_graph()) == {}


@pytest.mark.parametrize(
    ("room", "may_use"),
    [
        ("vocabulary", {"vocabulary"}),  # imports nothing of svckit outside itself
        ("clients", {"vocabulary", "clients"}),  # what a product service installs, nothing more
        ("net", {"vocabulary", "clients", "net"}),
        ("storage", {"vocabulary", "clients", "net", "storage"}),
        ("serving", set(rooms.ROOMS)),
    ],
)
def test_what_each_room_may_import(room: str, may_use: set[str]) -> None:
    assert {r for r in rooms.ROOMS if rooms.rank(r) <= rooms.rank(room)} == may_use
    graph = import_graph()
    used = {
        rooms.ROOM_OF[t]
        for m, r in rooms.ROOM_OF.items()
        if r == room
        for t in graph[m]
        if t in rooms.ROOM_OF
    }
    assert used <= may_use


def test_the_room_check_finds_an_import_upward() -> None:
    graph = {
        "svckit.ids": {"svckit.db"},
        "svckit.tls": {"svckit.tracing", "svckit.errors"},
        "svckit.db": set(),
    }
    assert room_breaches(graph) == {
        "svckit.ids (vocabulary)": ["svckit.db (storage)"],
        "svckit.tls (clients)": ["svckit.tracing (serving)"],
    }


def test_the_client_rooms_import_only_the_client_distributions_libraries() -> None:
    """The vocabulary and clients rooms are the client distribution: every library they import, at any
    depth of their code, is the standard library, the generated stubs or a dependency it declares."""
    allowed = packaging.declared(ROOT / "clients" / "pyproject.toml")
    assert allowed == {"grpc", "google.protobuf", "google.rpc", "grpc_status", "cryptography", "jsonschema"}
    wrong: dict[str, list[str]] = {}
    for module, room in sorted(rooms.ROOM_OF.items()):
        if room not in rooms.CLIENT_ROOMS:
            continue
        for name, _ in packaging.imports_of(source_of(module).read_text()):
            top = name.split(".")[0]
            if (
                top in ("svckit", "travel")
                or top in sys.stdlib_module_names
                or packaging.is_allowed(name, allowed)
            ):
                continue
            wrong.setdefault(module, []).append(name)
    assert wrong == {}

"""What the two package builds share (scripts/build_partner_package, scripts/build_client_package): reading
a module's imports, the import names a pyproject's dependencies give, the check that an assembled package
imports nothing else, and setuptools' own build backend (PEP 517, offline) making the wheel and sdist.

Each build assembles its package's source tree in a temporary directory, never in the repository, so
the repository keeps one copy of every module.
"""

from __future__ import annotations

import argparse
import ast
import os
import pathlib
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Distributions whose import name is not their name (lower case, "-" as "_").
IMPORT_NAMES = {
    "grpcio": "grpc",
    "grpcio_status": "grpc_status",
    "protobuf": "google.protobuf",
    "googleapis_common_protos": "google.rpc",
}


class BuildError(Exception):
    pass


def imports_of(source: str, *, relative: bool = False) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement, at any depth (a lazy import is an import too). A
    relative import is refused unless ``relative`` (then its module is given as written, without dots)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level and not relative:
                raise BuildError("relative imports are not rewritten; use absolute ones")
            if not node.level:
                found.append((node.module or "", [alias.name for alias in node.names]))
    return found


def declared(pyproject: pathlib.Path) -> set[str]:
    """The import names of the package's dependencies (``grpcio``: ``grpc``; ``protobuf``:
    ``google.protobuf``; otherwise the distribution's name, lower case)."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("-", "_") for d in deps}
    return {IMPORT_NAMES.get(name, name) for name in names}


def is_allowed(module: str, allowed: Iterable[str]) -> bool:
    """Is ``module`` one of ``allowed`` (import names, dotted ones included) or inside one?"""
    return any(module == name or module.startswith(name + ".") for name in allowed)


def check_libraries(
    package_dirs: Iterable[pathlib.Path], own: set[str], allowed: set[str], package: str, pyproject: str
) -> None:
    """Refuse (BuildError) a module under ``package_dirs`` that imports a library other than the standard
    library, the package's ``own`` top-level packages and its dependencies ``allowed``, naming the module,
    the library and ``package`` (what the package is called in the message) and its ``pyproject``."""
    for package_dir in package_dirs:
        for path in sorted(package_dir.rglob("*.py")):
            for module, _ in imports_of(path.read_text(), relative=True):
                top = module.split(".")[0]
                if top in own or top in sys.stdlib_module_names or is_allowed(module, allowed):
                    continue
                rel = path.relative_to(package_dir.parent)
                raise BuildError(
                    f"{rel} imports {module}, which {package} does not depend on "
                    f"(its dependencies: {', '.join(sorted(allowed))}; {pyproject})"
                )


def build_python() -> str:
    """An interpreter with setuptools: the project's venv when there is one (scripts/_bootstrap.sh)."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def run_python(args: list[str], cwd: pathlib.Path, what: str) -> None:
    """``build_python() args...`` in ``cwd``, its tools (protoc's plugins) on PATH; a failure is a
    BuildError naming ``what``."""
    python = build_python()
    env = {**os.environ, "PATH": os.pathsep.join([str(pathlib.Path(python).parent), os.environ["PATH"]])}
    done = subprocess.run(
        [python, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )  # fmt: skip
    if done.returncode != 0:
        raise BuildError(f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def build_dists(stage: pathlib.Path, out: pathlib.Path, stem: str) -> tuple[pathlib.Path, pathlib.Path]:
    """Build the wheel and the sdist of the source tree ``stage`` into ``out`` (earlier builds of
    ``stem``, the distribution's file name prefix, removed first); their paths."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{stem}-*"):
        old.unlink()
    # The directory is read once: the backend rewrites sys.argv as it runs.
    code = (
        "import sys; from setuptools import build_meta as b; "
        "d = sys.argv[1]; b.build_wheel(d); b.build_sdist(d)"
    )
    run_python(["-c", code, str(out)], stage, "setuptools")
    (wheel,) = out.glob(f"{stem}-*.whl")
    (sdist,) = out.glob(f"{stem}-*.tar.gz")
    return wheel, sdist


def command(
    name: str,
    doc: str | None,
    build: Callable[[pathlib.Path], tuple[pathlib.Path, pathlib.Path]],
    argv: list[str] | None,
) -> int:
    """A build script's command line: ``--out DIR`` (default dist/); prints the wheel's and the sdist's paths,
    or ``<name>: <why>`` and exits 1."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "dist", help="where (default dist/)")
    args = parser.parse_args(argv)
    try:
        wheel, sdist = build(args.out.resolve())
    except BuildError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    print(wheel)
    print(sdist)
    return 0

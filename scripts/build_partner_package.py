"""Build the partner package (``svc-partner``: ``svc`` and the webhook verification helper) into dist/.

    scripts/build_partner_package [--out DIR]      prints the wheel's and the sdist's paths

The package is assembled in a temporary directory, never in the repository: partner/pyproject.toml and
partner/README.md, svccli/*.py as the package ``svc_partner``, and every svckit module svccli imports
(followed through their own svckit imports) as ``svc_partner._kit``, with the ``from svckit...`` and
``from svccli...`` imports rewritten to those names. So the repository keeps one copy of each module
(services keep importing svckit, never svccli), and the wheel carries what ``svc`` runs on. The build
refuses a module that imports a library the package does not declare (only httpx and websockets, and
the standard library): a server library reaching svccli's imports stops the build instead of breaking a
partner's install. Then setuptools' own build backend (PEP 517) builds the wheel and the sdist, offline.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = ROOT / "partner"  # the package's pyproject.toml and README.md
PACKAGE = "svc_partner"
KIT = f"{PACKAGE}._kit"

_REWRITES = [
    (re.compile(r"^(\s*)from svckit\.([\w.]+) import", re.M), rf"\1from {KIT}.\2 import"),
    (re.compile(r"^(\s*)from svckit import", re.M), rf"\1from {KIT} import"),
    (re.compile(r"^(\s*)from svccli\.([\w.]+) import", re.M), rf"\1from {PACKAGE}.\2 import"),
    (re.compile(r"^(\s*)from svccli import", re.M), rf"\1from {PACKAGE} import"),
]


class BuildError(Exception):
    pass


def imports_of(source: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement, at any depth (a lazy import is an import too)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise BuildError("relative imports are not rewritten; use absolute ones")
            found.append((node.module or "", [alias.name for alias in node.names]))
    return found


def svckit_closure(start: list[pathlib.Path]) -> list[str]:
    """The svckit modules (``svckit.x``) the files ``start`` import, directly or through each other."""
    seen: set[str] = set()
    todo = [p.read_text() for p in start]
    while todo:
        for module, names in imports_of(todo.pop()):
            if module.split(".")[0] != "svckit":
                continue
            if module == "svckit":
                wanted = [f"svckit.{n}" for n in names if (ROOT / "svckit" / f"{n}.py").is_file()]
                if len(wanted) != len(names):
                    raise BuildError(f"from svckit import {', '.join(names)}: import the modules instead")
            else:
                wanted = [module]
            for name in wanted:
                if name in seen:
                    continue
                path = ROOT / (name.replace(".", "/") + ".py")
                if not path.is_file():
                    raise BuildError(f"{name}: only single-file svckit modules can be carried")
                seen.add(name)
                todo.append(path.read_text())
    return sorted(seen)


def rewrite(source: str, origin: str) -> str:
    for pattern, replacement in _REWRITES:
        source = pattern.sub(replacement, source)
    for module, _ in imports_of(source):
        if module.split(".")[0] in ("svckit", "svccli"):
            raise BuildError(f"{origin}: `import {module}` is left after rewriting; use `from ... import`")
    return source


def declared(pyproject: pathlib.Path) -> set[str]:
    """The import names of the package's dependencies (their distribution names, lower case)."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("-", "_") for d in deps}


def check_libraries(package_dir: pathlib.Path, allowed: set[str]) -> None:
    for path in sorted(package_dir.rglob("*.py")):
        for module, _ in imports_of(path.read_text()):
            top = module.split(".")[0]
            if top != PACKAGE and top not in sys.stdlib_module_names and top not in allowed:
                rel = path.relative_to(package_dir.parent)
                raise BuildError(
                    f"{rel} imports {module}, which the partner package does not depend on "
                    f"(its dependencies: {', '.join(sorted(allowed))}; partner/pyproject.toml)"
                )


def assemble(stage: pathlib.Path) -> pathlib.Path:
    """The package's source tree under ``stage``; returns the package directory."""
    shutil.copy(SOURCE / "pyproject.toml", stage / "pyproject.toml")
    shutil.copy(SOURCE / "README.md", stage / "README.md")
    package = stage / PACKAGE
    (package / "_kit").mkdir(parents=True)
    cli = sorted((ROOT / "svccli").glob("*.py"))
    for path in cli:
        (package / path.name).write_text(rewrite(path.read_text(), f"svccli/{path.name}"))
    for module in svckit_closure(cli):
        name = module.split(".", 1)[1]
        text = (ROOT / "svckit" / f"{name}.py").read_text()
        (package / "_kit" / f"{name}.py").write_text(rewrite(text, f"svckit/{name}.py"))
    (package / "_kit" / "__init__.py").write_text(
        '"""Copies of the svckit modules svc imports, made by scripts/build_partner_package."""\n'
    )
    check_libraries(package, declared(stage / "pyproject.toml"))
    return package


def build_python() -> str:
    """An interpreter with setuptools: the project's venv when there is one (scripts/_bootstrap.sh)."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def build(out: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("svc_partner-*"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="svc-partner-") as tmp:
        stage = pathlib.Path(tmp)
        assemble(stage)
        # The directory is read once: the backend rewrites sys.argv as it runs.
        code = (
            "import sys; from setuptools import build_meta as b; "
            "d = sys.argv[1]; b.build_wheel(d); b.build_sdist(d)"
        )
        done = subprocess.run(
            [build_python(), "-c", code, str(out)], cwd=stage, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise BuildError(f"setuptools failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (wheel,) = out.glob("svc_partner-*.whl")
    (sdist,) = out.glob("svc_partner-*.tar.gz")
    return wheel, sdist


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "dist", help="where (default dist/)")
    args = parser.parse_args(argv)
    try:
        wheel, sdist = build(args.out.resolve())
    except BuildError as exc:
        print(f"build_partner_package: {exc}", file=sys.stderr)
        return 1
    print(wheel)
    print(sdist)
    return 0


if __name__ == "__main__":
    sys.exit(main())

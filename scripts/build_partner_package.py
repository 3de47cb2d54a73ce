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

import pathlib
import re
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the shared part, beside this script
from package_assembly import ROOT, BuildError, build_dists, command, declared, imports_of
from package_assembly import check_libraries as _check_libraries

__all__ = ["BuildError", "assemble", "build", "check_libraries", "declared", "imports_of", "rewrite"]

SOURCE = ROOT / "partner"  # the package's pyproject.toml and README.md
PACKAGE = "svc_partner"
KIT = f"{PACKAGE}._kit"

_REWRITES = [
    (re.compile(r"^(\s*)from svckit\.([\w.]+) import", re.M), rf"\1from {KIT}.\2 import"),
    (re.compile(r"^(\s*)from svckit import", re.M), rf"\1from {KIT} import"),
    (re.compile(r"^(\s*)from svccli\.([\w.]+) import", re.M), rf"\1from {PACKAGE}.\2 import"),
    (re.compile(r"^(\s*)from svccli import", re.M), rf"\1from {PACKAGE} import"),
]


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


def check_libraries(package_dir: pathlib.Path, allowed: set[str]) -> None:
    _check_libraries([package_dir], {PACKAGE}, allowed, "the partner package", "partner/pyproject.toml")


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


def build(out: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    with tempfile.TemporaryDirectory(prefix="svc-partner-") as tmp:
        stage = pathlib.Path(tmp)
        assemble(stage)
        return build_dists(stage, out, "svc_partner")


def main(argv: list[str] | None = None) -> int:
    return command("build_partner_package", __doc__, build, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Build the client distribution (``travel-clients``: svckit's clients and vocabulary, and the gRPC stubs)
into dist/.

    scripts/build_client_package [--out DIR]      prints the wheel's and the sdist's paths

A product service installs it to call authsvc and webhookd with ``svckit.clients`` and nothing of the
servers. The package is assembled in a temporary directory, never in the repository: clients/pyproject.toml
and clients/README.md, every module of the rooms the distribution carries (``svckit.rooms.CLIENT_ROOMS``:
vocabulary and clients) copied as is under its own name (``svckit.clients``, ``svckit.tls``: the import
paths the services use too), and the stubs of proto/ generated afresh (scripts/gen_protos.py) as
``travel``. The build refuses a module that imports a library the distribution does not declare, or an
svckit module it does not carry. Then setuptools' build backend makes the wheel and the sdist, offline
(scripts/package_assembly.py, shared with scripts/build_partner_package).
"""

from __future__ import annotations

import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the shared part, beside this script
from package_assembly import (
    ROOT,
    BuildError,
    build_dists,
    check_libraries,
    command,
    declared,
    imports_of,
    run_python,
)

sys.path.insert(0, str(ROOT))  # the rooms are read from this repository's svckit
from svckit.rooms import CLIENT_ROOMS, ROOM_OF

SOURCE = ROOT / "clients"  # the distribution's pyproject.toml and README.md
STEM = "travel_clients"


def carried() -> list[str]:
    """The svckit modules the distribution carries: every module of its rooms."""
    return sorted(m for m, room in ROOM_OF.items() if room in CLIENT_ROOMS)


def source_path(module: str) -> pathlib.Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def check_svckit_imports(modules: list[str]) -> None:
    """Every svckit module the carried ones import (at any depth of their code) is carried too."""
    have = set(modules)
    for module in modules:
        for name, names in imports_of(source_path(module).read_text()):
            if name.split(".")[0] != "svckit":
                continue
            wanted = {name} if name != "svckit" else {f"svckit.{n}" for n in names} & set(ROOM_OF)
            missing = sorted(w for w in wanted if w not in have and w != "svckit")
            if missing:
                raise BuildError(
                    f"{module} imports {', '.join(missing)}, which the client distribution does not carry "
                    f"(only the rooms {', '.join(CLIENT_ROOMS)}: svckit/rooms.py)"
                )


def assemble(stage: pathlib.Path) -> list[pathlib.Path]:
    """The distribution's source tree under ``stage``; returns its package directories (svckit, travel)."""
    shutil.copy(SOURCE / "pyproject.toml", stage / "pyproject.toml")
    shutil.copy(SOURCE / "README.md", stage / "README.md")
    modules = carried()
    check_svckit_imports(modules)
    for module in modules:
        source = source_path(module)
        target = stage / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    run_python([str(ROOT / "scripts" / "gen_protos.py"), "--out", str(stage)], ROOT, "gen_protos.py")
    packages = [stage / "svckit", stage / "travel"]
    check_libraries(
        packages,
        {"svckit", "travel"},
        declared(stage / "pyproject.toml"),
        "the client distribution",
        "clients/pyproject.toml",
    )
    return packages


def build(out: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    with tempfile.TemporaryDirectory(prefix="travel-clients-") as tmp:
        stage = pathlib.Path(tmp)
        assemble(stage)
        return build_dists(stage, out, STEM)


def main(argv: list[str] | None = None) -> int:
    return command("build_client_package", __doc__, build, argv)


if __name__ == "__main__":
    sys.exit(main())

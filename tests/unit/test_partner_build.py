"""scripts/build_partner_package's assembly, without building: the package carries svccli and exactly the
svckit modules it imports (through each other), every import rewritten to the package's names, and a
server library reaching those imports stops the build."""

from __future__ import annotations

import ast
import pathlib

import pytest

from tests.support import ROOT, script

build = script("build_partner_package")


def test_the_package_carries_svccli_and_the_svckit_modules_it_imports(tmp_path: pathlib.Path) -> None:
    package = build.assemble(tmp_path)
    names = {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    assert {f"{p.name}" for p in (ROOT / "svccli").glob("*.py")} <= names
    assert {"_kit/signing.py", "_kit/events.py", "_kit/catalog.py", "_kit/flags.py"} <= names
    assert not names & {"_kit/db.py", "_kit/clients/__init__.py", "_kit/grpc_server.py", "_kit/tracing.py"}
    for path in package.rglob("*.py"):
        for module, _ in build.imports_of(path.read_text()):
            assert module.split(".")[0] not in ("svckit", "svccli"), (path, module)
    main = ast.parse((package / "__main__.py").read_text())
    assert any(
        isinstance(n, ast.ImportFrom) and n.module == "svc_partner._kit.signing" for n in ast.walk(main)
    )


def test_a_server_library_in_the_imports_stops_the_build(tmp_path: pathlib.Path) -> None:
    package = build.assemble(tmp_path)
    (package / "_kit" / "extra.py").write_text("def f():\n    import sqlalchemy\n")
    with pytest.raises(build.BuildError, match="sqlalchemy, which the partner package does not depend on"):
        build.check_libraries(package, build.declared(tmp_path / "pyproject.toml"))
    assert build.declared(tmp_path / "pyproject.toml") == {"httpx", "websockets"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from svckit.signing import verify\n", "from svc_partner._kit.signing import verify\n"),
        ("from svckit import addresses\n", "from svc_partner._kit import addresses\n"),
        (
            "def f():\n    from svccli.listen import Fatal\n",
            "def f():\n    from svc_partner.listen import Fatal\n",
        ),
        ("from svccli import webhooks\n", "from svc_partner import webhooks\n"),
        ("import json  # svckit is named in a comment\n", "import json  # svckit is named in a comment\n"),
    ],
)
def test_rewrite(source: str, expected: str) -> None:
    assert build.rewrite(source, "x") == expected


def test_a_plain_import_of_svckit_is_refused() -> None:
    with pytest.raises(build.BuildError, match=r"import svckit\.signing"):
        build.rewrite("import svckit.signing\n", "svccli/x.py")

"""scripts/build_client_package's assembly, without building the wheel: the distribution carries exactly
the vocabulary and clients rooms (svckit/rooms.py) under their own names and the generated stubs, and a
server library, or an svckit module of another room, reaching those imports stops the build."""

from __future__ import annotations

import pathlib

import pytest

from svckit import rooms
from tests.support import ROOT, script

build = script("build_client_package")


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    stage = tmp_path_factory.mktemp("clients-stage")
    build.assemble(stage)
    return stage


def test_it_carries_the_client_rooms_and_the_stubs(assembled: pathlib.Path) -> None:
    carried = {
        ".".join(p.relative_to(assembled).with_suffix("").parts).removesuffix(".__init__")
        for p in (assembled / "svckit").rglob("*.py")
    }
    assert carried == {m for m, room in rooms.ROOM_OF.items() if room in rooms.CLIENT_ROOMS}
    assert {"svckit.clients.auth", "svckit.tls", "svckit.eventcheck", "svckit.errors"} <= carried
    assert not carried & {"svckit.grpc_server", "svckit.db", "svckit.tracing", "svckit.tlsflags"}
    stubs = {p.relative_to(assembled).as_posix() for p in (assembled / "travel").rglob("*")}
    assert {"travel/auth/v1/auth_pb2_grpc.py", "travel/webhooks/v1/webhooks_pb2.pyi"} <= stubs
    # Copied as they are: the import paths product services and the services share.
    tls = (assembled / "svckit" / "tls.py").read_text()
    assert tls == (ROOT / "svckit" / "tls.py").read_text()


def test_a_server_library_in_the_imports_stops_the_build(assembled: pathlib.Path) -> None:
    extra = assembled / "svckit" / "clients" / "extra.py"
    extra.write_text("def f():\n    import sqlalchemy\n")
    try:
        with pytest.raises(
            build.BuildError, match="sqlalchemy, which the client distribution does not depend on"
        ):
            build.check_libraries(
                [assembled / "svckit"],
                {"svckit", "travel"},
                build.declared(assembled / "pyproject.toml"),
                "the client distribution",
                "clients/pyproject.toml",
            )
    finally:
        extra.unlink()


def test_an_import_of_a_module_it_does_not_carry_stops_the_build() -> None:
    build.check_svckit_imports(build.carried())  # the rooms' modules import each other only
    with pytest.raises(
        build.BuildError, match=r"svckit.clients.channels imports svckit.tls, which the client"
    ):
        build.check_svckit_imports(["svckit.clients.channels"])

"""Every secret file the code or the scripts write is the owner's alone (0600), whatever the umask and
whatever mode a file already there had: development CA keys, sealing keys, run_stack's keys."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import stat
import sys
from collections.abc import Iterator

import pytest

from svckit import devca
from svckit.secretbox import parse_key, write_new_key, write_private

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    old = os.umask(0)  # the worst case: nothing masked
    try:
        yield
    finally:
        os.umask(old)


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_devca_keys_are_0600_and_certificates_public(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "tls"
    written = devca.init_dir(d, ("authsvc",))
    keys = [p for p in written if p.suffix == ".key"]
    assert {p.name for p in keys} == {"ca.key", "authsvc.key"}
    assert all(mode(p) == 0o600 for p in keys)
    assert all(mode(p) == 0o644 for p in written if p.suffix == ".pem")
    assert mode(d) == 0o700


def test_a_key_written_over_a_wider_file_is_0600(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "old.key"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, b"new")
    assert (mode(path), path.read_bytes()) == (0o600, b"new")


def test_a_new_sealing_key_file_is_0600_and_a_key(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "secrets.key"
    write_new_key(path)
    assert mode(path) == 0o600
    assert len(parse_key(path.read_text())) == 32


def test_run_stack_makes_its_keys_0600(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("run_stack_for_test", ROOT / "scripts" / "run_stack.py")
    assert spec is not None and spec.loader is not None
    run_stack = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, run_stack)  # its dataclasses look themselves up there
    spec.loader.exec_module(run_stack)
    monkeypatch.setattr(run_stack, "VAR", tmp_path / "var")
    path = run_stack.secrets_key_file("portal-csrf.key")
    assert mode(path) == 0o600 and mode(tmp_path / "var") == 0o700
    assert "os.umask(0o077)" in (ROOT / "scripts" / "run_stack.py").read_text()

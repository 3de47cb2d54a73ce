"""The environment the suite runs in is exactly the lock: every locked distribution that applies to this
interpreter is installed at its locked version, nothing else is installed but the installer and the project,
and the lock agrees with pyproject.toml's bounds (requirements.lock is a subset of requirements-dev.lock,
at the same versions). scripts/lock writes the files; scripts/_bootstrap.sh installs them with hashes."""

from __future__ import annotations

import re
from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# The installer (venv puts it there), and the project under test (an editable install of this checkout).
NOT_LOCKED = {"pip", "travel-auth-webhooks"}


def locked(name: str) -> dict[str, str]:
    """name -> version of every line of the lock file ``name`` whose marker holds here."""
    text = (ROOT / name).read_text()
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not re.match(r"^[A-Za-z0-9]", line):
            continue  # hashes, comments, continuation lines
        req = Requirement(line.rstrip(" \\"))
        if req.marker is not None and not req.marker.evaluate():
            continue
        (spec,) = req.specifier
        assert spec.operator == "==", line
        found[canonicalize_name(req.name)] = spec.version
    return found


def test_every_line_is_pinned_with_hashes() -> None:
    for name in ("requirements.lock", "requirements-dev.lock"):
        text = (ROOT / name).read_text()
        pins = re.findall(r"^([A-Za-z0-9][^\n]*)\\\n((?:\s+--hash=sha256:[0-9a-f]{64}[ \\]*\n)+)", text, re.M)
        heads = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
        assert len(pins) == len(heads) > 10, name


def test_installed_is_exactly_the_lock() -> None:
    want = locked("requirements-dev.lock")
    have: dict[str, str] = {canonicalize_name(d.metadata["Name"]): d.version for d in distributions()}
    for name in NOT_LOCKED:
        have.pop(name, None)
    assert {n: v for n, v in have.items() if want.get(n) != v} == {}
    assert set(want) - set(have) == set()


def test_runtime_lock_is_the_dev_lock_without_the_tools() -> None:
    runtime, dev = locked("requirements.lock"), locked("requirements-dev.lock")
    assert {n: v for n, v in runtime.items() if dev.get(n) != v} == {}
    for tool in ("pytest", "mypy", "ruff", "grpcio-tools", "uv"):
        assert tool in dev and tool not in runtime
    assert runtime["sanic"].startswith("25.12.") and runtime["websockets"].startswith("17.4")

"""No module of the code passes 600 lines (the team's rule: small modules named for what they hold). Tests
are outside the rule; everything that runs, ships or measures is in it: the services, svckit, the CLIs,
the examples and the scripts."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT = 600
CHECKED = ("svckit", "authsvc", "webhookd", "edge", "portal", "svcctl", "svccli", "examples", "scripts")


def modules() -> list[pathlib.Path]:
    return sorted(p for top in CHECKED for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_rule_sees_every_package() -> None:
    found = {p.relative_to(ROOT).parts[0] for p in modules()}
    assert found == set(CHECKED)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_at_most_600_lines(path: pathlib.Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= LIMIT, f"{path.relative_to(ROOT)}: {lines} lines; split it by what it holds"

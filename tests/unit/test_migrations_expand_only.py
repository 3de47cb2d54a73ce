"""Every schema revision from 0010 on is expand-only (docs/operations.md "Upgrades and rollbacks"): old and
new processes serve side by side during a rolling upgrade, so an ``upgrade()`` adds what the old release can
ignore and never drops, renames or retypes what it may still read. The revisions before 0010 were released
under the same rule, written down later (0009 moved the queue; its path was made safe instead)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONTRACTING = {"drop_column", "drop_table", "drop_constraint", "alter_column", "rename_table"}
FIRST_CHECKED = {"authsvc": 0, "webhookd": 10, "edge": 0}  # each service's first revision under the check


def revisions() -> list[pathlib.Path]:
    found = []
    for service, first in FIRST_CHECKED.items():
        for path in sorted((ROOT / service / "migrations" / "versions").glob("[0-9]*.py")):
            if int(path.name.split("_")[0]) >= first:
                found.append(path)
    return found


def contracting_calls(source: str) -> list[str]:
    """The ``op.<name>`` calls of ``upgrade()`` that contract the schema, and raw SQL that does. Pure."""
    tree = ast.parse(source)
    upgrade = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "upgrade")
    found = []
    for node in ast.walk(upgrade):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in CONTRACTING:
                found.append(node.func.attr)
            if node.func.attr == "execute" and node.args and isinstance(node.args[0], ast.Constant):
                sql = str(node.args[0].value).upper()
                if any(w in sql for w in ("DROP ", "RENAME ", "ALTER COLUMN")):
                    found.append(sql[:60])
    return found


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def upgrade():\n    op.add_column('t', c)\n    op.create_index('i', 't', ['c'])", []),
        ("def upgrade():\n    op.drop_column('t', 'c')", ["drop_column"]),
        ("def upgrade():\n    op.alter_column('t', 'c', new_column_name='d')", ["alter_column"]),
        ("def upgrade():\n    op.execute('ALTER TABLE t RENAME c TO d')", ["ALTER TABLE T RENAME C TO D"]),
        ("def upgrade():\n    pass\ndef downgrade():\n    op.drop_table('t')", []),
    ],
)
def test_contracting_calls(source: str, found: list[str]) -> None:
    assert contracting_calls(source) == found


@pytest.mark.parametrize("path", revisions(), ids=lambda p: f"{p.parts[-4]}/{p.name}")
def test_revision_is_expand_only(path: pathlib.Path) -> None:
    assert contracting_calls(path.read_text()) == []

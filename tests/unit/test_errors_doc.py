"""docs/errors.md has one section per error type of svckit/errors.py (the docUrl anchor), and the error
table of docs/edge.md agrees with ERROR_KINDS (issue 9 item 8)."""

from __future__ import annotations

import re

from edge.responses import error_body
from svckit.errors import ERROR_KINDS
from tests.support import ROOT

DOCS = ROOT / "docs"
# Portal sign-in and roles: answered by the portal, never by the edge.
PORTAL_ONLY = {"invalid_credentials", "second_factor_required", "session_expired", "forbidden"}


def sections() -> list[str]:
    """The anchors of docs/errors.md: its ``## <type>`` headings (a heading's anchor is its text)."""
    text = (DOCS / "errors.md").read_text()
    return re.findall(r"^## ([a-z_]+)$", text, flags=re.MULTILINE)


def test_every_error_type_has_one_section() -> None:
    found = sections()
    assert sorted(set(found)) == sorted(found), "a type has two sections"
    assert set(ERROR_KINDS) <= set(found), f"no section for {sorted(set(ERROR_KINDS) - set(found))}"
    assert set(found) <= set(ERROR_KINDS), f"sections for no type: {sorted(set(found) - set(ERROR_KINDS))}"


def test_each_section_states_the_status_of_the_table() -> None:
    text = (DOCS / "errors.md").read_text()
    for etype, kind in ERROR_KINDS.items():
        section = text.split(f"\n## {etype}\n", 1)[1]
        assert section.lstrip().startswith(f"**{kind.http_status}.**"), etype


def test_doc_url_names_the_section() -> None:
    body = error_body("conflict", "m", "req_x", "https://docs.example/api")
    assert body["error"]["docUrl"] == "https://docs.example/api/errors#conflict"  # type: ignore[index]
    assert "conflict" in sections()


def test_edge_error_table_matches_error_kinds() -> None:
    text = (DOCS / "edge.md").read_text()
    table = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows = {m[1]: int(m[0]) for m in re.findall(r"^\| (\d{3}) \| `([a-z_]+)` \|", table, flags=re.MULTILINE)}
    assert rows == {t: k.http_status for t, k in ERROR_KINDS.items() if t not in PORTAL_ONLY}

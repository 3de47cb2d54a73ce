"""Where a ListAuditEvents page starts in either order (authsvc._audit_pages), by table."""

from __future__ import annotations

import pytest

from authsvc._audit_pages import WrongOrder, audit_page_start, audit_page_token
from svckit.pages import BadPageToken, page_token

CASES: list[tuple[str, str, bool, int | type[Exception]]] = [
    # (name, token, newest_first, start or error)
    ("first page, oldest first", "", False, 0),
    ("first page, newest first", "", True, 0),
    ("oldest first continues after seq", page_token(41), False, 41),
    ("newest first continues before seq", page_token("newest", 41), True, 41),
    ("oldest-first token sent newest first", page_token(41), True, WrongOrder),
    ("newest-first token sent oldest first", page_token("newest", 41), False, WrongOrder),
    ("not a number", page_token("x"), False, BadPageToken),
    ("not a number, newest first", page_token("newest", "x"), True, BadPageToken),
    ("bad number behind a foreign order", page_token("x"), True, BadPageToken),
    ("unknown order word", page_token("oldest", 41), False, BadPageToken),
    ("negative", page_token(-1), False, BadPageToken),
    ("three parts", page_token("newest", 1, 2), True, BadPageToken),
    ("not base64", "%%%", False, BadPageToken),
    ("another list's token", page_token("1700000000.0", "key_1"), False, BadPageToken),
]


@pytest.mark.parametrize(("name", "token", "newest_first", "expected"), CASES, ids=[c[0] for c in CASES])
def test_audit_page_start(name: str, token: str, newest_first: bool, expected: int | type[Exception]) -> None:
    if isinstance(expected, int):
        assert audit_page_start(token, newest_first) == expected
    else:
        with pytest.raises(expected):
            audit_page_start(token, newest_first)


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("seq", [1, 7, 123456789])
def test_token_round_trip(seq: int, newest_first: bool) -> None:
    assert audit_page_start(audit_page_token(seq, newest_first), newest_first) == seq


def test_oldest_first_token_format_is_unchanged() -> None:
    """Tokens handed out before newest_first existed still continue their listing."""
    assert audit_page_token(5, False) == page_token(5)

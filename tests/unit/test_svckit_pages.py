"""svckit.pages: one page-token format for every list RPC."""

from __future__ import annotations

import base64

import pytest

from svckit.pages import BAD_PAGE_TOKEN, BadPageToken, page_parts, page_token


@pytest.mark.parametrize("parts", [("1700000000.25", "key_abc"), ("17",), ("1735689600123456", "evt_x")])
def test_round_trip(parts: tuple[str, ...]) -> None:
    token = page_token(*parts)
    assert "|" not in token  # opaque
    assert page_parts(token, len(parts)) == list(parts)


BAD = [
    ("not base64", "%%%", 2),
    ("wrong number of parts", page_token("a", "b", "c"), 2),
    ("one part asked, two given", page_token("1", "x"), 1),
    ("not UTF-8 inside", base64.urlsafe_b64encode(b"\xff\xfe|x").decode(), 2),
    ("non-ASCII token", "\u00e9t\u00e9", 2),
    ("empty", "", 2),
]


@pytest.mark.parametrize(("name", "token", "n"), BAD, ids=[b[0] for b in BAD])
def test_a_token_not_made_here_is_refused(name: str, token: str, n: int) -> None:
    with pytest.raises(BadPageToken, match=BAD_PAGE_TOKEN):
        page_parts(token, n)

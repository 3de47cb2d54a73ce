"""A signed-out POST (sign-in, accepting an invitation) must come from the portal's own pages
(portal.csrf.cross_origin), by table: a planted nonce cookie with its token signs nobody in."""

from __future__ import annotations

import pytest

from portal.csrf import cross_origin

HOST = "portal.example:8443"


@pytest.mark.parametrize(
    ("fetch_site", "origin", "expected"),
    [
        ("same-origin", "https://portal.example:8443", False),
        ("same-origin", "", False),
        # A sibling subdomain (where a cookie is planted from) is same-site, not same-origin.
        ("same-site", "https://evil.portal.example", True),
        ("cross-site", "https://attacker.example", True),
        ("none", "", True),
        # Fetch Metadata absent (an older browser): the Origin decides.
        ("", "https://portal.example:8443", False),
        ("", "http://PORTAL.example:8443", False),
        ("", "https://attacker.example", True),
        ("", "https://portal.example", True),  # another port is another origin
        ("", "null", True),
        ("", "file://portal.example:8443", True),
        # Neither: not a browser, nothing to plant a cookie in; the token alone decides.
        ("", "", False),
    ],
)
def test_cross_origin(fetch_site: str, origin: str, expected: bool) -> None:
    assert cross_origin(fetch_site, origin, HOST) is expected

"""An endpoint URL split as webhookd's sends take it (``svckit.http.PooledTransport.post``, through
``_split``): the origin connected to and the request target, path and query."""

from __future__ import annotations

import pytest

from svckit.http import _split

CASES = [
    ("https://hooks.partner.test/h", ("https", "hooks.partner.test", 443, "/h")),
    ("https://hooks.partner.test", ("https", "hooks.partner.test", 443, "/")),  # no path: the root
    ("https://hooks.partner.test/", ("https", "hooks.partner.test", 443, "/")),
    ("https://hooks.partner.test:8443/a/b/", ("https", "hooks.partner.test", 8443, "/a/b/")),
    # The query is kept; a fragment is never sent.
    ("https://hooks.partner.test/h?x=1&y=2", ("https", "hooks.partner.test", 443, "/h?x=1&y=2")),
    ("https://hooks.partner.test/h#part", ("https", "hooks.partner.test", 443, "/h")),
    ("http://[::1]:8080/h", ("http", "::1", 8080, "/h")),
]


@pytest.mark.parametrize(("url", "expected"), CASES, ids=[c[0] for c in CASES])
def test_request_target(url: str, expected: tuple[str, str, int, str]) -> None:
    assert _split(url) == expected

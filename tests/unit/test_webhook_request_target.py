"""``_sender.request_target``: an endpoint URL split as the transport's ``request`` fast path takes it."""

from __future__ import annotations

import pytest

from webhookd._sender import request_target

CASES = [
    ("https://hooks.partner.test/h", ("https://hooks.partner.test", "/h")),
    ("https://hooks.partner.test", ("https://hooks.partner.test", "/")),  # no path: the root
    ("https://hooks.partner.test/", ("https://hooks.partner.test", "/")),
    ("https://hooks.partner.test:8443/a/b/", ("https://hooks.partner.test:8443", "/a/b/")),
    ("https://hooks.partner.test/h?x=1&y=2", ("https://hooks.partner.test", "/h?x=1&y=2")),  # query kept
    ("https://hooks.partner.test/h#part", ("https://hooks.partner.test", "/h")),  # a fragment is never sent
    ("http://[::1]:8080/h", ("http://[::1]:8080", "/h")),
]


@pytest.mark.parametrize(("url", "expected"), CASES, ids=[c[0] for c in CASES])
def test_request_target(url: str, expected: tuple[str, str]) -> None:
    assert request_target(url) == expected

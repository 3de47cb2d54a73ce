"""Which portal requests need a session and which a CSRF token (portal.access), by table: public routes
are matched whole, never by prefix (the reproduction: /healthz/keys/key_x ran a key's page signed out)."""

from __future__ import annotations

import pytest

from portal.access import Access, access, refusal

SESSION = Access(session=True, csrf=False)
SESSION_CSRF = Access(session=True, csrf=True)
PUBLIC = Access(session=False, csrf=False)
PUBLIC_CSRF = Access(session=False, csrf=True)


@pytest.mark.parametrize(
    ("method", "path", "need"),
    [
        ("GET", "/healthz", PUBLIC),
        ("HEAD", "/healthz", PUBLIC),
        ("GET", "/healthz/keys/key_x", SESSION),  # the reproduction: /<env>/keys/<key_id> with env=healthz
        ("POST", "/healthz/keys/key_x/revoke", SESSION_CSRF),
        ("GET", "/healthz/", SESSION),
        ("GET", "/healthzX", SESSION),
        ("POST", "/healthz", SESSION_CSRF),  # public for reading only
        ("GET", "/signin", PUBLIC),
        ("POST", "/signin", PUBLIC_CSRF),  # signed out, the nonce's token
        ("GET", "/signinX", SESSION),
        ("GET", "/signin/x", SESSION),
        ("GET", "/favicon.ico", PUBLIC),
        ("GET", "/favicon.icox", SESSION),
        ("GET", "/favicon_ico", SESSION),
        ("GET", "/static/portal.css", PUBLIC),
        ("GET", "/static/htmx.min.js", PUBLIC),
        ("GET", "/static/", SESSION),
        ("GET", "/static/../x", SESSION),
        ("GET", "/static/..", SESSION),
        ("GET", "/static/.env", SESSION),
        ("GET", "/static/a/b", SESSION),
        ("GET", "/static/a%2Fb", SESSION),
        ("GET", "/static/portal.css\n", SESSION),
        ("POST", "/static/portal.css", SESSION_CSRF),
        ("GET", "/invite/inv_AbC-12_x", PUBLIC),
        ("POST", "/invite/inv_AbC-12_x", PUBLIC_CSRF),
        ("GET", "/invite/", SESSION),
        ("GET", "/invite/a/b", SESSION),
        ("GET", "/invite/../live/keys", SESSION),
        ("GET", "/live/keys/key_x", SESSION),
        ("POST", "/live/keys", SESSION_CSRF),
        ("POST", "/signout", SESSION_CSRF),
        ("DELETE", "/live/keys/key_x", SESSION_CSRF),
        ("get", "/healthz", PUBLIC),
        ("GET", "/", Access(session=False, csrf=False, root=True)),
        ("GET", "//healthz", SESSION),
    ],
)
def test_access(method: str, path: str, need: Access) -> None:
    assert access(method, path) == need


@pytest.mark.parametrize(
    ("status", "signed_in", "location", "kind"),
    [
        (200, False, "", None),
        (303, True, "/live/keys", None),
        (302, False, "/signin", "signin_redirect"),
        (303, False, "/signin", "signin_redirect"),
        (303, True, "/signin", None),  # a signed-in user signing out: a request like any other
        (302, False, "/live/", None),
        (401, False, "", "401"),
        (403, True, "", "403"),
        (404, False, "", "404"),
        (405, False, "", "405"),
        (429, False, "", "429"),
        (500, False, "", None),  # an error of ours is logged on its own
    ],
)
def test_refusal(status: int, signed_in: bool, location: str, kind: str | None) -> None:
    assert refusal(status, signed_in, location) == kind

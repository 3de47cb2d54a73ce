"""The portal's CSRF tokens: pure functions of the portal's secret key, no I/O.

A token is an HMAC-SHA256 under the portal's key (``--csrf-key-file`` / ``PORTAL_CSRF_KEY``, or a random
key per process), so nobody without the key can make one, however they set the browser's cookies:
  - signed in: the HMAC of the session id (authsvc's ``ses_...``, never sent to the browser). It changes
    whenever the session does (sign-in, password change), and a token of one session is refused on any
    other;
  - signed out (sign-in and invitation forms): the HMAC of a random per-browser nonce kept in an
    HttpOnly cookie. A cookie the browser was given by someone else comes without the matching token.
The two kinds are domain-separated, so a signed-out token never passes as a session's, and they are
compared in constant time (OWASP's "signed double-submit cookie" and "synchronizer token" patterns).

A signed-out form has one more check (``cross_origin``): a nonce cookie can be planted (by a sibling
subdomain, or over plain http) together with the token the attacker got for it, and would then sign the
victim's browser into the attacker's account (login CSRF). So a signed-out POST must come from the
portal's own pages: ``Sec-Fetch-Site: same-origin`` where the browser sends Fetch Metadata, else an
``Origin`` naming the portal's own host. A client sending neither (no browser: nothing to plant a cookie
in) is judged by the token alone.
"""

from __future__ import annotations

import hashlib
import hmac

SESSION = b"portal-csrf/session\x00"
SIGNED_OUT = b"portal-csrf/signed-out\x00"


def token(key: bytes, session_id: str, nonce: str) -> str:
    """The token forms carry: bound to ``session_id`` when signed in, else to the browser's ``nonce``
    ("" when the browser has none yet: no token)."""
    if session_id:
        message = SESSION + session_id.encode()
    elif nonce:
        message = SIGNED_OUT + nonce.encode()
    else:
        return ""
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def cross_origin(fetch_site: str, origin: str, host: str) -> bool:
    """Did a signed-out POST come from elsewhere than the portal's pages? ``fetch_site``: the request's
    Sec-Fetch-Site; ``origin``: its Origin; ``host``: its Host (each "" when absent)."""
    if fetch_site:
        return fetch_site != "same-origin"
    if origin:
        scheme, sep, rest = origin.partition("://")
        return not sep or scheme not in ("http", "https") or rest.lower() != host.lower()
    return False


def valid(key: bytes, session_id: str, nonce: str, sent: str) -> bool:
    """Is ``sent`` the token of this session (signed in) or of this browser's nonce (signed out)?"""
    expected = token(key, session_id, nonce)
    return bool(expected) and hmac.compare_digest(sent.encode(), expected.encode())

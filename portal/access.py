"""Which requests the portal serves without a session, and which need a CSRF token: a pure function of
the method and the exact path (``lifecycle.load`` applies it before any route runs).

Only these routes are public, each matched whole (never a prefix, so ``/healthz/keys/key_x`` (a
``/<env>/keys/<key_id>`` page) or ``/signinX`` needs a session like every other page):

- ``GET /healthz``, ``GET /readyz``, ``GET /favicon.ico``, ``GET /static/<name>`` (one path segment, no
  dot first: never ``..``);
- ``GET|POST /signin`` and ``GET|POST /invite/<token>`` (one segment of URL-safe characters).

``/`` is its own case (a redirect to sign in, or to ``/live/``). Every request whose method is not GET
or HEAD needs a CSRF token, public or not (signed out: the one of the browser's nonce, portal.csrf).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SAFE_METHODS = frozenset({"GET", "HEAD"})
_READ = SAFE_METHODS
_FORM = SAFE_METHODS | {"POST"}
PUBLIC_ROUTES: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = (
    (_READ, re.compile(r"/healthz")),
    (_READ, re.compile(r"/readyz")),
    (_READ, re.compile(r"/favicon\.ico")),
    (_READ, re.compile(r"/static/[A-Za-z0-9][A-Za-z0-9._-]*")),
    (_FORM, re.compile(r"/signin")),
    (_FORM, re.compile(r"/invite/[A-Za-z0-9_-]+")),
)


@dataclass(frozen=True, slots=True)
class Access:
    session: bool  # a signed-in user is needed (else: sign in)
    csrf: bool  # the request's CSRF token is checked
    root: bool = False  # "/": redirected, to sign in or to /live/


def access(method: str, path: str) -> Access:
    csrf = method.upper() not in SAFE_METHODS
    if path == "/":
        return Access(session=False, csrf=csrf, root=True)
    public = any(method.upper() in methods and pattern.fullmatch(path) for methods, pattern in PUBLIC_ROUTES)
    return Access(session=not public, csrf=csrf)


# Answers that refuse the caller: logged as counts (svckit.refusallog), never a line each.
REFUSED_STATUSES = frozenset({400, 401, 403, 404, 405, 413, 429})


def refusal(status: int, signed_in: bool, location: str) -> str | None:
    """The kind of refusal an answer is (what its log counts it as), or None for an answer logged as a
    request: a refusing status, or a signed-out caller sent to sign in."""
    if status in REFUSED_STATUSES:
        return str(status)
    if not signed_in and 300 <= status < 400 and location == "/signin":
        return "signin_redirect"
    return None

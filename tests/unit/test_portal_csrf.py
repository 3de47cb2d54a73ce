"""The portal's CSRF tokens (portal.csrf), by table: bound to the session when signed in, to the browser's
nonce when signed out, and never made without the portal's key."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from portal import csrf

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
SES = "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa"
NONCE = "nonce-of-this-browser"


def made(key: bytes = KEY, session_id: str = SES, nonce: str = "") -> str:
    return csrf.token(key, session_id, nonce)


CASES = [
    # (name, session_id, nonce, sent, valid)
    ("the session's own token", SES, "", made(), True),
    ("a token of another session", SES, "", made(session_id="ses_bbbbbbbbbbbbbbbbbbbbbbbbbb"), False),
    ("the session's token under another key", SES, "", made(OTHER_KEY), False),
    ("no token", SES, "", "", False),
    ("a token cut short", SES, "", made()[:-1], False),
    ("signed-out: the nonce's token", "", NONCE, made(session_id="", nonce=NONCE), True),
    ("signed-out: another nonce's token", "", NONCE, made(session_id="", nonce="other"), False),
    ("signed-out: no nonce cookie", "", "", made(session_id="", nonce=NONCE), False),
    ("signed-out: no nonce, no token", "", "", "", False),
    # The old scheme: the HMAC of the cookie under a constant, which anyone setting the cookie can make.
    (
        "signed-out: a forged cookie and token without the key",
        "",
        "attacker-chosen",
        hmac.new(b"attacker-chosen", b"portal-csrf", hashlib.sha256).hexdigest(),
        False,
    ),
    ("a signed-out token used when signed in", SES, NONCE, made(session_id="", nonce=NONCE), False),
    ("a session's token used signed out", "", SES, made(), False),
    ("non-ASCII sent", SES, "", "é" * 64, False),
]


@pytest.mark.parametrize(("name", "session_id", "nonce", "sent", "ok"), CASES, ids=[c[0] for c in CASES])
def test_csrf_valid(name: str, session_id: str, nonce: str, sent: str, ok: bool) -> None:
    assert csrf.valid(KEY, session_id, nonce, sent) is ok


def test_token_changes_with_the_session_and_the_key() -> None:
    assert made() != made(session_id="ses_other") and made() != made(OTHER_KEY)
    assert csrf.token(KEY, "", "") == ""

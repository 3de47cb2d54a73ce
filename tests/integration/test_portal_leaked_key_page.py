"""A key revoked by a leak report: its portal page says "revoked: found in public at <url>" with the date,
from the audit record (autoescaped: the URL is the reporter's text), and the usual revocation facts."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import hashlib
import html
import re

from tests.integration.portal_stack import OPS, Stack, stack  # noqa: F401 (the fixtures)
from travel.auth.v1 import auth_pb2 as apb

URL = "https://github.com/partner/app/blob/abc/config.py?<b>x</b>"


def _fact(page: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}">(.*?)</(?:p|dd)>', page, re.S)
    assert found, testid
    return html.unescape(re.sub(r"<[^>]+>", "", found[1]))


async def test_a_leaked_keys_page_says_where_it_was_found(stack: Stack) -> None:
    owner = await stack.join("leak-owner@acme.example")
    made = await stack.auth.CreateKey(
        apb.CreateKeyRequest(
            account_id=stack.account_id,
            environment=apb.ENVIRONMENT_SANDBOX,
            scopes=["hotels:read"],
            actor=OPS,
        )
    )
    page = f"/sandbox/keys/{made.key.id}"
    assert 'data-testid="leak-notice"' not in (await owner.get(page)).text
    await stack.auth.RevokeLeakedKeys(
        apb.RevokeLeakedKeysRequest(
            tokens=[
                apb.LeakedToken(
                    token_hash=hashlib.sha256(made.secret.encode()).hexdigest(), url=URL, source="content"
                )
            ],
            reporter="GitHub secret scanning",
            actor=apb.Actor(user="secret-scanning"),
        )
    )
    shown = (await owner.get(page)).text
    assert "<b>x</b>" not in shown  # the reporter's URL, escaped
    key = (await stack.auth.GetKey(apb.GetKeyRequest(key_id=made.key.id))).key
    when = key.revoked_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S UTC")
    notice = _fact(shown, "leak-notice")
    assert notice.startswith(f"revoked: found in public at {URL} on {when}.")
    assert _fact(shown, "key-status") == "revoked"
    assert _fact(shown, "revoked-by").startswith("secret-scanning")
    assert _fact(shown, "revoke-reason") == f"found in public at {URL} (GitHub secret scanning, content)"
    assert made.secret not in shown
    await owner.aclose()

"""A revoked key's page says when, why and by whom it was revoked; an invitation's page names the address
it invites (sealed in the link the portal made: a changed label names nobody). Over real HTTP against a
real authsvc and webhookd."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import html
import re

import httpx

from tests.integration.portal_stack import OPS, Stack, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb


def _fact(page: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}">([^<]*)<', page)
    assert found, testid
    return html.unescape(found[1])


async def _new_key(client: httpx.AsyncClient, name: str) -> str:
    token = csrf_of((await client.get("/sandbox/keys")).text)
    made = await client.post("/sandbox/keys", data={"csrf": token, "name": name, "scopes": "hotels:read"})
    assert made.status_code == 303
    return str(made.headers["location"]).removesuffix("/secret")


async def test_a_revoked_keys_page_says_when_why_and_by_whom(stack: Stack) -> None:
    owner = await stack.join("revoker@acme.example")
    page = await _new_key(owner, "leaky")
    active = (await owner.get(page)).text
    assert 'data-testid="revoked-at"' not in active
    revoked = await owner.post(
        f"{page}/revoke",
        data={"csrf": csrf_of(active), "confirm": "leaky", "reason": "pasted in a <b>chat</b>"},
    )
    assert revoked.status_code == 303
    shown = (await owner.get(page)).text
    assert _fact(shown, "key-status") == "revoked"
    assert _fact(shown, "revoke-reason") == "pasted in a <b>chat</b>"  # autoescaped, shown as text
    assert _fact(shown, "revoked-by") == "revoker@acme.example"
    key = (await stack.auth.GetKey(apb.GetKeyRequest(key_id=page.rsplit("/", 1)[1]))).key
    assert _fact(shown, "revoked-at") == key.revoked_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S UTC")

    # Revoked by an operator, without a reason: who, and that none was given.
    other = await _new_key(owner, "ops-revoked")
    await stack.auth.RevokeKey(apb.RevokeKeyRequest(key_id=other.rsplit("/", 1)[1], actor=OPS))
    viewer = await stack.join("revoked-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    shown = (await viewer.get(other)).text
    assert _fact(shown, "revoked-by").startswith(OPS.user)
    assert _fact(shown, "revoke-reason") == "none given"
    await owner.aclose()
    await viewer.aclose()


async def test_the_invitation_page_names_the_invited_address(stack: Stack) -> None:
    owner = await stack.join("inviter@acme.example")
    token = csrf_of((await owner.get("/sandbox/users")).text)
    sent = await owner.post(
        "/sandbox/users/invite", data={"csrf": token, "email": "New.Joiner@acme.example", "role": "developer"}
    )
    assert sent.status_code == 303
    notice = (await owner.get(sent.headers["location"])).text
    link = re.search(r"(http://\S+/invite/[^\s<]+)", html.unescape(notice))
    assert link, notice
    path = "/invite/" + link[1].split("/invite/", 1)[1]
    newcomer = stack.client()
    page = await newcomer.get(path)
    assert page.status_code == 200
    assert re.search(r'data-testid="invited-email">.*?<strong>([^<]+)</strong>', page.text)[1].lower() == (  # type: ignore[index]
        "new.joiner@acme.example"
    )
    # A refused password keeps naming it.
    short = await newcomer.post(path, data={"csrf": csrf_of(page.text), "password": "short"})
    assert short.status_code == 400 and 'data-testid="invited-email"' in short.text
    # A changed or missing label names nobody; the token still works.
    bare, label = path.split("?for=")
    tampered = label[:-2] + ("A" if label[-2] != "A" else "B") + label[-1]
    for other in (bare, f"{bare}?for={tampered}", f"{bare}?for="):
        shown = await newcomer.get(other)
        assert shown.status_code == 200 and 'data-testid="invited-email"' not in shown.text, other
    # Another invitation's label does not name this one's address.
    other_invite = await stack.ids.CreateInvite(
        ipb.CreateInviteRequest(
            account_id=stack.account_id, email="x@acme.example", role=ipb.USER_ROLE_VIEWER, actor=OPS
        )
    )
    swapped = await newcomer.get(f"/invite/{other_invite.token}?for={label}")
    assert 'data-testid="invited-email"' not in swapped.text
    await owner.aclose()
    await newcomer.aclose()


async def test_a_live_key_waits_for_certification_in_the_portal(stack: Stack) -> None:
    """requireCertification on: the portal's live key form is refused 403 and says what is missing; once
    certified (here an operator's override), the same form creates the key."""
    owner = await stack.join("golive@acme.example")
    sandbox = await _new_key(owner, "probe")
    account_id = (await stack.auth.GetKey(apb.GetKeyRequest(key_id=sandbox.rsplit("/", 1)[1]))).key.account_id
    await stack.auth.SetCertificationRequired(
        apb.SetCertificationRequiredRequest(account_id=account_id, required=True, actor=OPS)
    )
    token = csrf_of((await owner.get("/live/keys")).text)
    refused = await owner.post("/live/keys", data={"csrf": token, "name": "prod", "scopes": "hotels:read"})
    assert refused.status_code == 403
    assert "passing certification report" in html.unescape(refused.text)
    listed = await stack.auth.ListKeys(
        apb.ListKeysRequest(account_id=account_id, environment=apb.ENVIRONMENT_LIVE)
    )
    assert not listed.keys
    await stack.auth.OverrideCertification(
        apb.OverrideCertificationRequest(account_id=account_id, reason="signed contract", actor=OPS)
    )
    made = await owner.post(
        "/live/keys", data={"csrf": csrf_of(refused.text), "name": "prod", "scopes": "hotels:read"}
    )
    assert made.status_code == 303
    await owner.aclose()

"""The portal's audit trail over real HTTP: webhook operations in the portal user's name, and the
trail newest first, paged back in time."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import re

from portal.app import PAGE_SIZE
from portal.web import SESSION_COOKIE
from tests.integration.portal_stack import OPS, Stack, _next_page, receiver, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb
from webhookd.testing import Receiver

WEBHOOK_ACTIONS = [
    "webhook_endpoint.created",
    "webhook_endpoint.updated",
    "webhook_endpoint.secret_rotated",
    "webhook_endpoint.enabled",
    "webhook_endpoint.recovered",
    "webhook_endpoint.test_sent",
    "webhook_attempt.resent",
    "webhook_endpoint.deleted",
]


async def test_webhook_operations_are_in_the_audit_trail_with_the_portal_user(
    stack: Stack, receiver: Receiver
) -> None:
    dev = await stack.join("dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    me = await stack.ids.GetSession(ipb.GetSessionRequest(session_token=dev.cookies[SESSION_COOKIE]))
    token = csrf_of((await dev.get("/sandbox/webhooks")).text)
    made = await dev.post(
        "/sandbox/webhooks",
        data={"csrf": token, "url": receiver.url("/h"), "events": "booking.confirmed", "description": "one"},
    )
    assert made.status_code == 303
    shown = await dev.get(made.headers["location"])
    secrets = re.findall(r"whsec_[A-Za-z0-9+/=]+", shown.text)
    endpoint = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)/", made.headers["location"])[1]  # type: ignore[index]
    base = f"/sandbox/webhooks/{endpoint}"
    edited = await dev.post(
        f"{base}/edit",
        data={
            "csrf": token,
            "url": receiver.url("/h"),
            "events": ["booking.confirmed", "booking.cancelled"],
            "description": "two",
        },
    )
    assert edited.status_code == 303
    rotated = await dev.post(f"{base}/rotate", data={"csrf": token, "overlap_hours": "24"})
    assert rotated.status_code == 303
    secrets += re.findall(r"whsec_[A-Za-z0-9+/=]+", (await dev.get(rotated.headers["location"])).text)
    assert len(secrets) == 2
    for action in ("enable", "recover"):
        assert (await dev.post(f"{base}/{action}", data={"csrf": token})).status_code == 303
    sent = await dev.post(f"{base}/test", data={"csrf": token})
    assert sent.status_code == 303
    await receiver.wait_for(1)
    attempt = ""
    for _ in range(200):
        page = (await dev.get(sent.headers["location"])).text
        found = re.search(r'data-attempt-id="(att_[A-Za-z0-9]+)"', page)
        if found:
            attempt = found[1]
            break
        await asyncio.sleep(0.05)
    resent = await dev.post(
        f"/sandbox/attempts/{attempt}/resend", headers={"X-CSRF-Token": token, "HX-Request": "true"}
    )
    assert resent.status_code == 202
    assert (await dev.post(f"{base}/delete", data={"csrf": token})).status_code == 303

    # Every operation, in order, in the signed-in user's name; never a secret.
    trail = await stack.auth.ListAuditEvents(
        apb.ListAuditEventsRequest(account_id=stack.account_id, actor_user_id=me.user.id)
    )
    webhook_events = [e for e in trail.events if e.action.startswith("webhook_")]
    assert [e.action for e in webhook_events] == WEBHOOK_ACTIONS
    for e in webhook_events:
        assert (e.actor.user, e.actor.user_id, e.actor.source_address) == (
            me.user.email,
            me.user.id,
            "127.0.0.1",
        )
        assert e.after["endpoint_id"] == endpoint and e.after["environment"] == "sandbox"
    updated = webhook_events[1]
    assert dict(updated.before) == {"description": "one", "events": ["booking.confirmed"]}
    assert dict(updated.after)["description"] == "two"
    assert all(secret not in str(trail.events) for secret in secrets)

    # The audit page shows them, newest first, filtered by user and by action.
    page = (await dev.get("/sandbox/audit", params={"user_id": me.user.id})).text
    assert re.findall(r'data-action="(webhook_[a-z_.]+)"', page) == WEBHOOK_ACTIONS[::-1]
    assert all(secret not in page for secret in secrets)
    rotations = (await dev.get("/sandbox/audit", params={"action": "webhook_endpoint.secret_rotated"})).text
    assert re.findall(r'data-action="([a-z_.]+)"', rotations) == ["webhook_endpoint.secret_rotated"]
    assert "dev@acme.example" in rotations and "<dt>overlap_seconds</dt><dd>86400</dd>" in rotations
    await dev.aclose()


def _audit_rows(page: str) -> list[tuple[str, str]]:
    """(action, key id) of the audit page's rows, in order."""
    return re.findall(r'<tr data-action="([a-z_.]+)"><td>[^<]*</td><td>[a-z_.]+</td>\n<td>([^<]*)</td>', page)


async def test_audit_trail_opens_newest_first_and_pages_back_in_time(stack: Stack) -> None:
    owner = await stack.join("audit-owner@acme.example")
    made = []
    for i in range(PAGE_SIZE + 3):
        created = await stack.auth.CreateKey(
            apb.CreateKeyRequest(
                account_id=stack.account_id,
                name=f"k{i}",
                environment=apb.ENVIRONMENT_SANDBOX,
                scopes=["hotels:read"],
                actor=OPS,
            )
        )
        made.append(created.key.id)
    newest = made[-1]
    await stack.auth.RevokeKey(apb.RevokeKeyRequest(key_id=newest, reason="done", actor=OPS))
    first = (await owner.get("/sandbox/audit")).text
    rows = _audit_rows(first)
    assert len(rows) == PAGE_SIZE
    # The first row is the newest event: the revocation just made, then the keys newest first.
    assert rows[0] == ("key.revoked", newest)
    assert rows[1:] == [("key.created", k) for k in made[::-1][: PAGE_SIZE - 1]]
    # The next page goes on back in time, to the account's creation; nothing repeated or skipped.
    second = (await owner.get("/sandbox/audit" + _next_page(first))).text
    older = _audit_rows(second)
    assert [k for _, k in older if k] == made[::-1][PAGE_SIZE - 1 :]
    actions = re.findall(r'data-action="([a-z_.]+)"', second)
    assert "account.created" in actions and _next_page(second) == ""
    await owner.aclose()

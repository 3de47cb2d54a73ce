"""The invitation link names the address it invites, sealed: ``/invite/<token>?for=<sealed e-mail>``.

Why: the page a new user opens should say which address they are joining as, and authsvc answers nothing
about an invitation before it is accepted (no read of an invitation by its token). The portal that made
the invitation seals its e-mail address into the link (``portal.flash``'s AES-GCM, bound to the token, for
the invitation's 7 days), so the page can show it and nobody can make a link that shows another address.
A link without the label (an operator's ``svcctl`` invitation) or with a label that does not open shows no
address; the token alone decides who joins either way.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from portal import flash
from portal.context import PortalRequest

LABEL_COOKIE = "invite-label"  # the seal's domain (associated data), not a cookie sent anywhere
LABEL_TTL = 8 * 24 * 3600  # past the invitation's own 7 days: the invitation's expiry decides


def invite_link(request: PortalRequest, public_url: str, token: str, email: str) -> str:
    """The link of a new invitation, its address sealed in."""
    label = flash.seal(request.app.ctx.flash_key, token, LABEL_COOKIE, {"e": email}, ttl=LABEL_TTL)
    return f"{public_url.rstrip('/')}/invite/{quote(token, safe='')}?for={label}"


def invited_email(request: PortalRequest, token: str) -> str:
    """The address the link's label names; "" when it has none or it does not open for this token."""
    label = request.args.get("for", "")
    if not label:
        return ""
    payload = flash.unseal(request.app.ctx.flash_key, token, LABEL_COOKIE, label)
    email = payload.get("e") if payload else None
    return email if isinstance(email, str) else ""


def invite_page(request: PortalRequest, token: str) -> dict[str, Any]:
    """What the invitation page shows of its link: the address, and the label its form posts back (so a
    refused password shows the address again)."""
    email = invited_email(request, token)
    return {"invited": email, "label": request.args.get("for", "") if email else ""}

"""``svcctl users invite --account ACCT --role owner --email E``: a portal user invited by an operator.

authsvc's ``IdentityService.CreateInvite`` with the operator (``--actor``) as who invites, so the first
owner of a new account can be made without a portal session. The invite's one-time token is shown only
inside the link printed on stdout (``--portal-url`` + ``/invite/<token>``, the portal's page that sets the
password); svcctl logs nothing, and the JSON printed holds the invite (id, e-mail, role, expiry) and the
link, never the token on its own.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from google.protobuf import json_format

from svcctl.client import auth_client
from svckit.prototables import USER_ROLE
from svckit.roles import ROLES
from travel.auth.v1 import auth_pb2, identity_pb2


def invite_link(portal_url: str, token: str) -> str:
    return f"{portal_url.rstrip('/')}/invite/{token}"


async def _invite(args: argparse.Namespace) -> int:
    async with auth_client(args) as auth:
        made = await auth.create_invite(
            identity_pb2.CreateInviteRequest(
                account_id=args.account,
                email=args.email,
                role=USER_ROLE.pb(args.role),
                actor=auth_pb2.Actor(user=args.actor),
            )
        )
    invite = json_format.MessageToDict(made.invite, preserving_proto_field_name=True)
    print(json.dumps({"invite": invite, "link": invite_link(args.portal_url, made.token)}, indent=2))
    return 0


def register(groups: Any) -> None:
    users = groups.add_parser("users", help="portal users").add_subparsers(dest="command", required=True)
    p = users.add_parser(
        "invite",
        help="invite an e-mail address into an account; prints the one-time link to set a password",
        description="Invite an e-mail address into an account with a role, as the operator (--actor); prints "
        "the invite and the one-time link (--portal-url + /invite/<token>) where the invitee sets a password",
    )
    p.add_argument("--account", required=True, help="the account, acct_...")
    p.add_argument("--email", required=True)
    p.add_argument("--role", required=True, choices=ROLES)
    p.set_defaults(handler=_invite)

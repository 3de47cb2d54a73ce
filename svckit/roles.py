"""Portal roles and what each may do: one table, read by authsvc (which enforces it on identity calls)
and by the portal (which hides what a role may not do and refuses the route with 403).

Like Stripe's dashboard roles: owners and admins do everything (only an owner makes or unmakes an
owner, and only an owner sets the account's sign-in rules), developers read keys and manage webhooks,
viewers only read. Who gets the account's alert e-mails (notifications.manage: the Notifications page,
which names the owners and admins themselves) is for owners and admins only.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["owner", "admin", "developer", "viewer"]
ROLES: tuple[Role, ...] = ("owner", "admin", "developer", "viewer")

Action = Literal[
    "account.read",
    "keys.read",
    "keys.write",
    "keys.revoke",
    "audit.read",
    "webhooks.read",
    "webhooks.write",
    "users.read",
    "users.manage",
    "account.security",
    "notifications.manage",
]

_READ: frozenset[str] = frozenset({"account.read", "keys.read", "audit.read", "webhooks.read", "users.read"})
# What owners and admins both may do beyond reading.
_MANAGE: frozenset[str] = frozenset(
    {"keys.write", "keys.revoke", "webhooks.write", "users.manage", "notifications.manage"}
)
ROLE_ACTIONS: dict[Role, frozenset[str]] = {
    "owner": _READ | _MANAGE | {"account.security"},
    "admin": _READ | _MANAGE,
    "developer": _READ | {"webhooks.write"},
    "viewer": _READ,
}


def allowed(role: str, action: Action) -> bool:
    """Whether ``role`` may do ``action``; an unknown role may do nothing."""
    return action in ROLE_ACTIONS.get(role, frozenset())  # type: ignore[call-overload]


def may_assign(actor_role: str, old_role: str | None, new_role: str | None) -> bool:
    """Whether ``actor_role`` may move a user from ``old_role`` to ``new_role`` (None: no user / removed).

    Managing users needs users.manage; making or unmaking an owner needs an owner.
    """
    if not allowed(actor_role, "users.manage"):
        return False
    if "owner" in (old_role, new_role):
        return actor_role == "owner"
    return True


def last_owner_kept(owners: int, old_role: str, new_role: str | None) -> bool:
    """False when the change would leave the account with no owner."""
    return not (old_role == "owner" and new_role != "owner" and owners <= 1)

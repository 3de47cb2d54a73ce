"""How many webhook endpoints an account may have in one environment (docs/webhooks.md "Limits").

Every publish fans an event out to the account's endpoints inside the publish (``_sql.SqlRepository``):
each endpoint's subscription is looked at and its content filter evaluated there. A filter is bounded on
its own (``svckit.jsonmatch``: at most ``MAX_STEPS`` steps), so what one publish costs is bounded by the
number of endpoints times that; without a cap on endpoints, one account could make every one of its
publishes (and the database writes they share with every other account) as slow as it likes. Stripe caps
webhook endpoints at 16 per account; that is the default here (``--max-endpoints`` sets another).

A deleted endpoint no longer counts. The count is taken in the transaction that inserts the new endpoint,
under a lock of the account and environment (PostgreSQL: a transaction-scoped advisory lock; SQLite: the
one writer), so concurrent registrations cannot together go past the cap.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from webhookd._errors import Conflict
from webhookd._tables import endpoints

MAX_ENDPOINTS = 16  # per account and environment (Stripe's cap); --max-endpoints


def refusal(existing: int, limit: int, environment: str) -> str | None:
    """Why one more endpoint is refused when the account has ``existing`` (not deleted) endpoints in
    ``environment`` under ``limit``; None: it fits. A limit below 1 allows none (an operator who stops
    registrations); the message names the limit and the way out (delete one)."""
    if existing < limit:
        return None
    return (
        f"this account already has {existing} webhook endpoints in {environment}, the limit is {limit} per "
        "account and environment; delete one it no longer needs (or send several event types to one)"
    )


async def check_room(conn: AsyncConnection, account_id: str, environment: str, limit: int) -> None:
    """Raise Conflict (409) when the account has no room for another endpoint in ``environment``; called in
    the transaction that inserts it."""
    c = endpoints.c
    if conn.dialect.name == "postgresql":
        await conn.execute(
            sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"),
            {"k": f"webhookd.endpoints:{account_id}:{environment}"},
        )
    existing = (
        await conn.execute(
            sa.select(sa.func.count())
            .select_from(endpoints)
            .where(c.account_id == account_id, c.environment == environment, c.deleted_at.is_(None))
        )
    ).scalar_one()
    why = refusal(int(existing), limit, environment)
    if why is not None:
        raise Conflict(why, metadata={"limit": str(limit)})

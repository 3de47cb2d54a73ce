"""Storage of partner accounts: creation, status (active / read-only), the editable fields, and the
portal users an account's alerts go to."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from authsvc._model import Account, AccountStatus, Actor, KeyChange
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import accounts, users

# Portal users read for an account's alert recipients, at most (owners and admins; far more than any
# account has).
MAX_ALERT_USERS = 500


class AccountStorage(SqlBase):
    async def create_account(self, account: Account, actor: Actor) -> Account:
        async with self.engine.begin() as conn:
            await conn.execute(
                accounts.insert().values(
                    id=account.id,
                    name=account.name,
                    # Stored as the releases before 'A'/'B' stored it, so an old process reads it.
                    mode=account.mode.value.lower(),
                    status=account.status,
                    admin_emails=json.dumps(list(account.admin_emails)),
                    daily_search_allowance=account.daily_search_allowance,
                    created_at=account.created_at.timestamp(),
                    updated_at=account.updated_at.timestamp(),
                )
            )
            await self._audit(
                conn,
                account_id=account.id,
                key_id="",
                action="account.created",
                actor=actor,
                now=account.created_at,
                before={},
                after={
                    "name": account.name,
                    "mode": account.mode,
                    "status": account.status,
                    "daily_search_allowance": account.daily_search_allowance,
                },
            )
        return account

    async def get_account(self, account_id: str) -> Account:
        async with self.engine.connect() as conn:
            return await self._get_account(conn, account_id)

    async def account_users(
        self, account_id: str, roles: Sequence[str]
    ) -> tuple[Account, list[tuple[str, str]]]:
        """The account and its portal users of ``roles``, as (e-mail, role) in sign-up order, read
        together (not_found for no account)."""
        stmt = (
            sa.select(users.c.email, users.c.role)
            .where(users.c.account_id == account_id, users.c.role.in_(list(roles)))
            .order_by(users.c.created_at, users.c.id)
            .limit(MAX_ALERT_USERS)
        )
        async with self.engine.connect() as conn:
            account = await self._get_account(conn, account_id)
            rows = (await conn.execute(stmt)).all()
        return account, [(str(r.email), str(r.role)) for r in rows]

    async def set_account_status(
        self, account_id: str, status: AccountStatus, actor: Actor, now: dt.datetime
    ) -> tuple[Account, bool]:
        async with self.engine.begin() as conn:
            before = await self._get_account(conn, account_id, lock=True)
            if before.status == status:
                return before, False
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == account_id)
                .values(status=status, updated_at=now.timestamp())
            )
            await self._audit(
                conn,
                account_id=account_id,
                key_id="",
                action="account.status_changed",
                actor=actor,
                now=now,
                before={"status": before.status},
                after={"status": status},
            )
            await self._notify(conn, KeyChange("account_updated", "", account_id, now))
            return await self._get_account(conn, account_id), True

    async def update_account(
        self, account_id: str, changes: dict[str, Any], actor: Actor, now: dt.datetime
    ) -> Account:
        """Change ``name``, ``admin_emails``, ``daily_search_allowance`` or ``look_to_book_target``; audited
        with the changed fields before and after. Fields given with their current value are no change; no
        change writes nothing."""
        async with self.engine.begin() as conn:
            before = await self._get_account(conn, account_id, lock=True)
            old = {
                "name": before.name,
                "admin_emails": list(before.admin_emails),
                "daily_search_allowance": before.daily_search_allowance,
                "look_to_book_target": before.look_to_book_target,
            }
            new = {f: list(v) if f == "admin_emails" else v for f, v in changes.items()}
            changed = sorted(f for f, v in new.items() if old[f] != v)
            if not changed:
                return before
            values: dict[str, Any] = {f: new[f] for f in changed}
            if "admin_emails" in values:
                values["admin_emails"] = json.dumps(values["admin_emails"])
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == account_id)
                .values(**values, updated_at=now.timestamp())
            )
            await self._audit(
                conn,
                account_id=account_id,
                key_id="",
                action="account.updated",
                actor=actor,
                now=now,
                before={f: old[f] for f in changed},
                after={f: new[f] for f in changed},
            )
            await self._notify(conn, KeyChange("account_updated", "", account_id, now))
            return await self._get_account(conn, account_id)

    async def set_certification(
        self,
        account_id: str,
        actor: Actor,
        now: dt.datetime,
        *,
        required: bool | None = None,
        certify_reason: str = "",
    ) -> tuple[Account, bool]:
        """Set whether the account must be certified (``required``), or count it certified now with a
        reason (``certify_reason``: an operator's override, or the run whose report passed). Audited
        (``account.certification_required`` / ``account.certified``, the reason in the record); a change to
        what already is writes nothing. (account, changed)."""
        async with self.engine.begin() as conn:
            before = await self._get_account(conn, account_id, lock=True)
            if required is not None:
                if before.require_certification == required:
                    return before, False
                values: dict[str, Any] = {"require_certification": required}
                action = "account.certification_required"
                old: dict[str, Any] = {"require_certification": before.require_certification}
                new: dict[str, Any] = {"require_certification": required}
            else:
                values = {"certified_at": now.timestamp()}
                action = "account.certified"
                was = before.certified_at.isoformat() if before.certified_at else None
                old, new = {"certified_at": was}, {"certified_at": now.isoformat(), "reason": certify_reason}
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == account_id)
                .values(**values, updated_at=now.timestamp())
            )
            await self._audit(
                conn,
                account_id=account_id,
                key_id="",
                action=action,
                actor=actor,
                now=now,
                before=old,
                after=new,
            )
            await self._notify(conn, KeyChange("account_updated", "", account_id, now))
            return await self._get_account(conn, account_id), True

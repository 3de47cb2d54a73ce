"""Storage of mode A credit: ledgers, holds and entries (rules: ``_ledger_rules``).

Every change is one transaction that first locks the ledger's row (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already takes the one write lock), so parallel holds against one
ledger are decided one after the other on the balance the previous one left: never more held than fits.
The hold, its entry, the new balance and any ``ledger.low_balance`` outbox row commit together.

On SQLite the ledger's writes of one process also queue on an asyncio lock before they ask for the
database's: a burst of holds then waits in order instead of in SQLite's busy handler, whose growing sleeps
would stretch the slowest past a caller's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from authsvc import _ledger_rules as rules
from authsvc._errors import Conflict, CreditExhausted, InvalidRequest, NotFound
from authsvc._ledger import ENTRY_OF_MOVE, CreditHold, EntryKind, HoldResult, Ledger, LedgerEntry
from authsvc._ledger_rules import Balance, HoldState, Outcome
from authsvc._model import AccountMode, Actor, OutboxEvent
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import credit_holds, from_row, ledger_entries, ledgers, required_time_of, time_of
from svckit.catalog import STATES, low_balance
from svckit.db import is_postgres
from svckit.ids import new_id
from svckit.peers import caller_var
from svckit.vocabulary import Environment


def ledger_of(row: Mapping[Any, Any]) -> Ledger:
    return Ledger(
        account_id=row["account_id"],
        environment=Environment(row["environment"]),
        currency=row["currency"],
        balance=Balance(
            limit=int(row["credit_limit"]),
            held=int(row["held"]),
            captured=int(row["captured"]),
            credits=int(row["credits"]),
            warning_set=None if row["warning_level"] is None else int(row["warning_level"]),
        ),
        below_warning=bool(row["below_warning"]),
        updated_at=time_of(row["updated_at"]),
    )


def hold_of(row: Mapping[Any, Any]) -> CreditHold:
    return from_row(
        CreditHold,
        row,
        environment=Environment,
        amount=int,
        state=HoldState,
        created_at=required_time_of,
        updated_at=required_time_of,
    )


def entry_of(row: Mapping[Any, Any]) -> LedgerEntry:
    return from_row(
        LedgerEntry,
        row,
        environment=Environment,
        kind=EntryKind,
        amount=int,
        available_after=int,
        created_at=required_time_of,
    )


def _empty(account_id: str, environment: Environment) -> Ledger:
    return Ledger(account_id, environment, "", Balance(), False, None)


class LedgerStorage(SqlBase):
    _ledger_lock: asyncio.Lock | None = None

    # -- helpers ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[AsyncConnection]:
        """One ledger transaction (on SQLite, one of this process's at a time)."""
        if is_postgres(self.engine):
            async with self.engine.begin() as conn:
                yield conn
            return
        if self._ledger_lock is None:
            self._ledger_lock = asyncio.Lock()
        async with self._ledger_lock, self.engine.begin() as conn:
            yield conn

    async def _locked_ledger(self, conn: AsyncConnection, account_id: str, env: Environment) -> Ledger:
        """The ledger's row, created empty if missing, locked for the rest of the transaction."""
        await conn.execute(
            self._insert(ledgers)
            .values(
                account_id=account_id,
                environment=env,
                currency="",
                credit_limit=0,
                held=0,
                captured=0,
                credits=0,
                warning_level=None,
                below_warning=False,
                updated_at=0.0,
            )
            .on_conflict_do_nothing(index_elements=["account_id", "environment"])
        )
        stmt = ledgers.select().where(ledgers.c.account_id == account_id, ledgers.c.environment == env)
        if is_postgres(self.engine):
            stmt = stmt.with_for_update()
        return ledger_of((await conn.execute(stmt)).mappings().one())

    async def _save(
        self, conn: AsyncConnection, ledger: Ledger, balance: Balance, now: dt.datetime, **extra: Any
    ) -> Ledger:
        """Store ``balance`` (and ``extra`` columns) on ``ledger``; queue ledger.low_balance when this
        change crossed the warning level (rules.warning)."""
        warn = rules.warning(ledger.below_warning, balance)
        values = {
            "credit_limit": balance.limit,
            "held": balance.held,
            "captured": balance.captured,
            "credits": balance.credits,
            "warning_level": balance.warning_set,
            "below_warning": warn.below,
            "updated_at": now.timestamp(),
            **extra,
        }
        await conn.execute(
            ledgers.update()
            .where(ledgers.c.account_id == ledger.account_id, ledgers.c.environment == ledger.environment)
            .values(**values)
        )
        currency = extra.get("currency", ledger.currency)
        if warn.send:
            await self._outbox(
                conn,
                OutboxEvent(
                    id=new_id("obx"),
                    account_id=ledger.account_id,
                    environment=ledger.environment,
                    type="ledger.low_balance",
                    state=STATES["ledger.low_balance"],
                    data=low_balance(currency, balance.available, balance.warning_level),
                    created_at=now,
                ),
            )
        return Ledger(ledger.account_id, ledger.environment, currency, balance, warn.below, now)

    async def _entry(
        self,
        conn: AsyncConnection,
        ledger: Ledger,
        kind: EntryKind,
        reference: str,
        amount: int,
        available_after: int,
        now: dt.datetime,
        *,
        actor: Actor | None = None,
        note: str = "",
    ) -> LedgerEntry:
        entry = LedgerEntry(
            id=new_id("led"),
            account_id=ledger.account_id,
            environment=ledger.environment,
            kind=kind,
            reference=reference,
            amount=amount,
            available_after=available_after,
            note=note,
            actor_user=actor.user if actor else "",
            # A hold's move names the product service that made it (its certificate).
            actor_service=actor.service if actor else caller_var.get(),
            created_at=now,
        )
        await conn.execute(
            ledger_entries.insert().values(
                id=entry.id,
                account_id=entry.account_id,
                environment=entry.environment,
                kind=entry.kind,
                reference=entry.reference,
                amount=entry.amount,
                available_after=entry.available_after,
                note=entry.note,
                actor_user=entry.actor_user,
                actor_service=entry.actor_service,
                created_at=now.timestamp(),
            )
        )
        return entry

    async def _hold_row(
        self, conn: AsyncConnection, account_id: str, env: Environment, ref: str
    ) -> CreditHold | None:
        c = credit_holds.c
        row = (
            (
                await conn.execute(
                    credit_holds.select().where(
                        c.account_id == account_id, c.environment == env, c.booking_ref == ref
                    )
                )
            )
            .mappings()
            .first()
        )
        return None if row is None else hold_of(row)

    async def _mode_a(self, conn: AsyncConnection, account_id: str) -> None:
        account = await self._get_account(conn, account_id)
        if account.mode != AccountMode.A:
            raise Conflict(
                "account_id: the account is mode B (the traveller pays): credit holds and ledgers are for "
                "mode A accounts only"
            )

    # -- holds -----------------------------------------------------------------------------------

    async def place_hold(
        self, account_id: str, env: Environment, ref: str, amount: int, currency: str, now: dt.datetime
    ) -> HoldResult:
        async with self._writing() as conn:
            await self._mode_a(conn, account_id)
            ledger = await self._locked_ledger(conn, account_id, env)
            existing = await self._hold_row(conn, account_id, env, ref)
            if existing is not None:
                move = rules.hold_again(existing.state, existing.amount, amount)
                if move.outcome is Outcome.CONFLICT:
                    raise Conflict(move.message)
                if move.outcome is Outcome.REPLAY:
                    return HoldResult(existing, ledger, True)
            if ledger.currency and currency != ledger.currency:
                raise InvalidRequest(f"currency: the ledger is in {ledger.currency}")
            if not rules.fits(ledger.balance, amount):
                available = ledger.balance.available
                raise CreditExhausted(
                    f"The credit available ({available} {ledger.currency or currency} minor units) does not "
                    f"cover this booking ({amount}); add credit or ask for a higher limit.",
                    metadata={"available": str(available), "amount": str(amount)},
                )
            balance = rules.after_move(ledger.balance, HoldState.RELEASED, HoldState.HELD, amount)
            hold = CreditHold(account_id, env, ref, amount, currency, HoldState.HELD, now, now)
            if existing is None:
                await conn.execute(
                    credit_holds.insert().values(
                        account_id=account_id,
                        environment=env,
                        booking_ref=ref,
                        amount=amount,
                        currency=currency,
                        state=hold.state,
                        created_at=now.timestamp(),
                        updated_at=now.timestamp(),
                    )
                )
            else:  # released, held again
                c = credit_holds.c
                await conn.execute(
                    credit_holds.update()
                    .where(c.account_id == account_id, c.environment == env, c.booking_ref == ref)
                    .values(state=hold.state, updated_at=now.timestamp())
                )
                hold = CreditHold(
                    account_id, env, ref, amount, currency, HoldState.HELD, existing.created_at, now
                )
            await self._entry(conn, ledger, EntryKind.HOLD, ref, amount, balance.available, now)
            saved = await self._save(conn, ledger, balance, now)
            return HoldResult(hold, saved, False)

    async def move_hold(
        self, account_id: str, env: Environment, ref: str, target: HoldState, now: dt.datetime
    ) -> HoldResult:
        """Capture (``target`` CAPTURED) or release (RELEASED) the hold of ``ref``."""
        async with self._writing() as conn:
            ledger = await self._locked_ledger(conn, account_id, env)
            hold = await self._hold_row(conn, account_id, env, ref)
            if hold is None:
                raise NotFound(f"booking_ref: no credit hold for {ref!r}")
            move = rules.transition(hold.state, target)
            if move.outcome is Outcome.CONFLICT:
                raise Conflict(move.message)
            if move.outcome is Outcome.REPLAY:
                return HoldResult(hold, ledger, True)
            balance = rules.after_move(ledger.balance, hold.state, target, hold.amount)
            c = credit_holds.c
            await conn.execute(
                credit_holds.update()
                .where(c.account_id == account_id, c.environment == env, c.booking_ref == ref)
                .values(state=target, updated_at=now.timestamp())
            )
            kind = ENTRY_OF_MOVE[target]
            await self._entry(conn, ledger, kind, ref, hold.amount, balance.available, now)
            saved = await self._save(conn, ledger, balance, now)
            moved = CreditHold(
                hold.account_id,
                hold.environment,
                ref,
                hold.amount,
                hold.currency,
                target,
                hold.created_at,
                now,
            )
            return HoldResult(moved, saved, False)

    # -- reads -----------------------------------------------------------------------------------

    async def get_ledger(self, account_id: str, env: Environment) -> Ledger:
        async with self.engine.connect() as conn:
            await self._mode_a(conn, account_id)
            row = (
                (
                    await conn.execute(
                        ledgers.select().where(
                            ledgers.c.account_id == account_id, ledgers.c.environment == env
                        )
                    )
                )
                .mappings()
                .first()
            )
            return _empty(account_id, env) if row is None else ledger_of(row)

    async def list_ledger_entries(
        self, account_id: str, env: Environment, limit: int, before_seq: int
    ) -> list[tuple[int, LedgerEntry]]:
        """(seq, entry) newest first, before ``before_seq`` (0: from the newest)."""
        async with self.engine.connect() as conn:
            await self._mode_a(conn, account_id)
            c = ledger_entries.c
            stmt = ledger_entries.select().where(c.account_id == account_id, c.environment == env)
            if before_seq:
                stmt = stmt.where(c.seq < before_seq)
            rows = (await conn.execute(stmt.order_by(c.seq.desc()).limit(limit))).mappings().all()
            return [(int(r["seq"]), entry_of(r)) for r in rows]

    # -- operators -------------------------------------------------------------------------------

    async def set_credit_limit(
        self, account_id: str, env: Environment, limit: int, currency: str, actor: Actor, now: dt.datetime
    ) -> Ledger:
        async with self._writing() as conn:
            await self._mode_a(conn, account_id)
            ledger = await self._locked_ledger(conn, account_id, env)
            if ledger.currency and currency and currency != ledger.currency:
                raise InvalidRequest(
                    f"currency: the ledger is in {ledger.currency}; one ledger has one currency"
                )
            if not ledger.currency and not currency:
                raise InvalidRequest("currency: required when the first limit is set (e.g. EUR)")
            balance = Balance(
                limit, ledger.balance.held, ledger.balance.captured, ledger.balance.credits,
                ledger.balance.warning_set,
            )  # fmt: skip
            await self._entry(conn, ledger, EntryKind.LIMIT, "", limit, balance.available, now, actor=actor)
            saved = await self._save(conn, ledger, balance, now, currency=currency or ledger.currency)
            await self._ledger_audit(conn, "ledger.limit_set", ledger, saved, actor, now)
            return saved

    async def set_warning_level(
        self, account_id: str, env: Environment, level: int | None, actor: Actor, now: dt.datetime
    ) -> Ledger:
        async with self._writing() as conn:
            await self._mode_a(conn, account_id)
            ledger = await self._locked_ledger(conn, account_id, env)
            b = ledger.balance
            balance = Balance(b.limit, b.held, b.captured, b.credits, level)
            await self._entry(
                conn, ledger, EntryKind.WARNING_LEVEL, "", balance.warning_level, balance.available, now,
                actor=actor,
            )  # fmt: skip
            saved = await self._save(conn, ledger, balance, now)
            await self._ledger_audit(conn, "ledger.warning_level_set", ledger, saved, actor, now)
            return saved

    async def add_credit(
        self,
        account_id: str,
        env: Environment,
        amount: int,
        reference: str,
        note: str,
        actor: Actor,
        now: dt.datetime,
    ) -> tuple[Ledger, LedgerEntry, bool]:
        """Credit ``amount``; the same ``reference`` again answers the first credit (replayed)."""
        async with self._writing() as conn:
            await self._mode_a(conn, account_id)
            ledger = await self._locked_ledger(conn, account_id, env)
            c = ledger_entries.c
            row = (
                (
                    await conn.execute(
                        ledger_entries.select().where(
                            c.account_id == account_id,
                            c.environment == env,
                            c.kind == EntryKind.CREDIT,
                            c.reference == reference,
                        )
                    )
                )
                .mappings()
                .first()
            )
            if row is not None:
                first = entry_of(row)
                if first.amount != amount:
                    raise Conflict(f"reference: already credited {first.amount} under this reference")
                return ledger, first, True
            if not ledger.currency:
                raise InvalidRequest("account_id: set a credit limit (and the currency) first")
            b = ledger.balance
            balance = Balance(b.limit, b.held, b.captured, b.credits + amount, b.warning_set)
            entry = await self._entry(
                conn, ledger, EntryKind.CREDIT, reference, amount, balance.available, now,
                actor=actor, note=note,
            )  # fmt: skip
            saved = await self._save(conn, ledger, balance, now)
            await self._ledger_audit(conn, "ledger.credit_added", ledger, saved, actor, now)
            return saved, entry, False

    async def _ledger_audit(
        self,
        conn: AsyncConnection,
        action: str,
        before: Ledger,
        after: Ledger,
        actor: Actor,
        now: dt.datetime,
    ) -> None:
        def fields(ledger: Ledger) -> dict[str, Any]:
            b = ledger.balance
            return {
                "environment": ledger.environment,
                "currency": ledger.currency,
                "credit_limit": b.limit,
                "credits": b.credits,
                "warning_level": b.warning_level,
                "available": b.available,
            }

        await self._audit(
            conn,
            account_id=before.account_id,
            key_id="",
            action=action,
            actor=actor,
            now=now,
            before=fields(before),
            after=fields(after),
        )

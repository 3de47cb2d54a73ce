"""Sealed columns under a keyring (``svckit.secretbox``): how many rows are still under an old key, and
the re-seal that rewrites them under the newest, for ``python -m <service> reseal``.

A sealed column is named by ``SealedColumn``: a table, its id column (the row id is the value's
associated data in every service that uses this) and the column. The re-seal walks the rows not yet
under the newest key in id order, a batch per transaction, and writes each only if it is still what it
read (compare and swap): a value a running process changed meanwhile is its own, already under the key
that process seals with, and is left alone. So it is idempotent, may run while the services serve, and
resumes where it stopped when run again. No value, sealed or open, is ever logged or printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from prometheus_client import Gauge
from sqlalchemy.ext.asyncio import AsyncEngine

from svckit.db import create_engine
from svckit.errors import ServiceError
from svckit.flags import add_flag, env_name
from svckit.migrations import add_database_flags
from svckit.outage import describe
from svckit.secretbox import KEYED_PREFIX, SealingKeyError, SecretBox

log = logging.getLogger(__name__)

BATCH = 500
# Seconds between counts of the rows under an old key (the gauge below).
COUNT_EVERY = 60.0

OLD_KEY_ROWS = Gauge(
    "sealed_rows_old_key",
    "Rows whose sealed value is not under the newest sealing key (0 once `reseal` has run), by column",
    ["column"],
)
UNKNOWN_KEY_ROWS = Gauge(
    "sealed_rows_unknown_key",
    "Rows sealed under a key id that is not in this process's keyring (they do not open), by column",
    ["column"],
)


@dataclass(frozen=True, slots=True)
class SealedColumn:
    table: sa.Table
    id_column: str
    column: str

    @property
    def name(self) -> str:
        return f"{self.table.name}.{self.column}"

    def _cols(self) -> tuple[sa.ColumnElement[str], sa.ColumnElement[str]]:
        return self.table.c[self.id_column], self.table.c[self.column]

    def not_current(self, box: SecretBox) -> sa.ColumnElement[bool]:
        """Rows holding a value the box would re-seal: another key's, an ``enc1:`` one, or plain text."""
        _, value = self._cols()
        return sa.and_(
            value.is_not(None), value != "", ~value.startswith(box.current_prefix(), autoescape=True)
        )

    def unknown_key(self, box: SecretBox) -> sa.ColumnElement[bool]:
        """Rows sealed under a key id the ring does not hold."""
        _, value = self._cols()
        known = [value.startswith(f"{KEYED_PREFIX}{kid}:", autoescape=True) for kid in box.ring_ids]
        return sa.and_(value.startswith(KEYED_PREFIX, autoescape=True), ~sa.or_(sa.false(), *known))


@dataclass(slots=True)
class Counts:
    column: str
    resealed: int = 0  # rewritten under the newest key
    changed: int = 0  # changed by a running process between the read and the write: left to it
    failed: int = 0  # did not open with any key of the ring (named by row id in the log)
    remaining: int = 0  # still not under the newest key when the run ended


async def count(engine: AsyncEngine, box: SecretBox, column: SealedColumn) -> tuple[int, int]:
    """(rows not under the newest key, rows under a key the ring does not hold)."""
    async with engine.connect() as conn:
        old = await conn.scalar(
            sa.select(sa.func.count()).select_from(column.table).where(column.not_current(box))
        )
        unknown = await conn.scalar(
            sa.select(sa.func.count()).select_from(column.table).where(column.unknown_key(box))
        )
    return int(old or 0), int(unknown or 0)


async def reseal(engine: AsyncEngine, box: SecretBox, column: SealedColumn, batch: int = BATCH) -> Counts:
    """Every value of ``column`` not under the newest key, sealed again under it (see the module)."""
    if not box.sealing:
        raise SealingKeyError("reseal needs a sealing key")
    counts = Counts(column.name)
    ident, value = column._cols()
    after = ""
    while True:
        async with engine.begin() as conn:
            rows = (
                await conn.execute(
                    sa.select(ident, value)
                    .where(column.not_current(box), ident > after)
                    .order_by(ident)
                    .limit(batch)
                )
            ).all()
            for row_id, stored in rows:
                try:
                    fresh = box.reseal(stored, row_id)
                except ServiceError:  # the box's key_wrong: a service words it for its flags
                    counts.failed += 1
                    log.error("a sealed value does not open with any key of the ring", extra={"row": row_id})
                    continue
                done = await conn.execute(
                    sa.update(column.table)
                    .where(ident == row_id, value == stored)
                    .values({column.column: fresh})
                )
                if done.rowcount:
                    counts.resealed += 1
                else:
                    counts.changed += 1
        if not rows:
            break
        after = rows[-1][0]
    counts.remaining, _ = await count(engine, box, column)
    return counts


class OldKeyGauge:
    """``sealed_rows_old_key`` and ``sealed_rows_unknown_key`` of each column, counted at start and every
    ``every`` seconds while the process runs (only when it has a sealing key)."""

    def __init__(
        self, engine: AsyncEngine, box: SecretBox, columns: Sequence[SealedColumn], every: float = COUNT_EVERY
    ) -> None:
        self.engine, self.box, self.columns, self.every = engine, box, list(columns), every
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for column in self.columns:
            found[column.name] = old, unknown = await count(self.engine, self.box, column)
            OLD_KEY_ROWS.labels(column.name).set(old)
            UNKNOWN_KEY_ROWS.labels(column.name).set(unknown)
            if unknown:
                log.warning(
                    "rows sealed under a key this process does not hold: they do not open",
                    extra={"column": column.name, "rows": unknown, "keys": self.box.ring_ids},
                )
        return found

    def start(self) -> None:
        if self.box.sealing and self.columns:
            self._task = asyncio.create_task(self._run(), name="sealed-rows")

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # the database down: the next round tries again
                log.warning("could not count sealed rows", extra={"error": describe(exc)})
            await asyncio.sleep(self.every)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def add_reseal_command(commands: Any, service: str, database: str, key_help: str) -> None:
    """``python -m <service> reseal --secrets-key-file NEW,OLD [--database URL]``: every sealed value
    under the newest key, counts printed, exit."""
    parser = commands.add_parser(
        "reseal",
        help="seal every stored secret again under the newest key of --secrets-key-file (a key rotation's "
        'second step: docs/operations.md "Sealing-key rotation"), print the counts and exit',
    )
    add_database_flags(parser, service, database)
    add_flag(
        parser, "--secrets-key-file", env=env_name(service, "secrets_key_file"), repeat=True, help=key_help
    )
    parser.add_argument("--batch-size", type=int, default=BATCH, help="rows rewritten per transaction")
    parser.add_argument(
        "--legacy-format",
        action="store_true",
        help="seal as releases before keyrings did (enc1:, no key id), under the first key: only before "
        "rolling back to such a release, with every process of this release stopped",
    )


def run_reseal(
    args: argparse.Namespace, service: str, box: SecretBox, columns: Sequence[SealedColumn]
) -> int:
    """The ``reseal`` command: one line per column on stdout; 0 when every row is under the newest key,
    1 when some are not (a value that opens with no key of the ring, or one left to a process still
    sealing with an older key: run it again once every process has the new ring), 2 when it cannot run."""
    if not box.sealing:
        print(f"{service}: reseal needs the keys: --secrets-key-file NEW,OLD (newest first)", file=sys.stderr)
        return 2
    target = box.writing(key_ids=not args.legacy_format)

    async def go() -> list[Counts]:
        engine = create_engine(args.database)
        try:
            return [await reseal(engine, target, column, args.batch_size) for column in columns]
        finally:
            await engine.dispose()

    try:
        results = asyncio.run(go())
    except ServiceError as exc:
        print(f"{service}: {exc.message}", file=sys.stderr)
        return 2
    except (OSError, sa.exc.SQLAlchemyError) as exc:
        print(f"{service}: reseal failed: {describe(exc)}", file=sys.stderr)
        return 2
    under = "enc1 (no key id)" if args.legacy_format else f"key {box.primary_id}"
    for c in results:
        print(
            f"{service} reseal {c.column}: {c.resealed} resealed under {under}, "
            f"{c.changed} changed meanwhile "
            f"(left to the process that wrote them), {c.failed} do not open with these keys, "
            f"{c.remaining} not under the newest key"
        )
    return 0 if all(c.remaining == 0 and c.failed == 0 for c in results) else 1

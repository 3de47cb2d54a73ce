"""Storage of certification runs: the run (one open per account, its key, its end, its POST count), the
requests the edge recorded for the run's key, the probe answers webhookd recorded, the signed report; and
the platform's report-signing keys (the private half sealed by the caller). The account row carries the
open run (``cert_run_*``) so that every Authorize answer tells the edge which key is under a run."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from authsvc._certify_rules import RunRequest
from authsvc._errors import Conflict, NotFound
from authsvc._model import Actor, KeyChange
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import accounts, metadata, time_of
from svckit.certification import Fault, claim_fault

# Requests kept per run: beyond it a run's records are dropped (one partner cannot fill the disk).
MAX_RUN_REQUESTS = 20_000
OPEN, FINISHED = "open", "finished"

runs = sa.Table(
    "auth_cert_runs",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("key_id", sa.String(40), nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ends_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float, nullable=True),
    sa.Column("fault_every", sa.Integer, nullable=False),
    sa.Column("posts", sa.Integer, nullable=False),
    sa.Column("unauthorized_until", sa.Float, nullable=True),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("passed", sa.Boolean, nullable=True),
    sa.Column("probes", sa.Text, nullable=False),
    sa.Column("report", sa.Text, nullable=True),
    sa.Index("auth_cert_runs_account", "account_id", "started_at"),
)
run_requests = sa.Table(
    "auth_cert_requests",
    metadata,
    sa.Column("run_id", sa.String(40), primary_key=True),
    sa.Column("request_id", sa.String(64), primary_key=True),
    sa.Column("method", sa.String(10), nullable=False),
    sa.Column("path", sa.String(200), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("error_type", sa.String(64), nullable=False),
    sa.Column("idempotency_key_digest", sa.String(64), nullable=False),
    sa.Column("body_digest", sa.String(64), nullable=False),
    sa.Column("fault", sa.String(24), nullable=False),
    sa.Column("retry_after", sa.Integer, nullable=False),
    sa.Column("probe", sa.Boolean, nullable=False),
    sa.Column("received_at", sa.Float, nullable=False),
)
signing_keys = sa.Table(
    "auth_cert_keys",
    metadata,
    sa.Column("key_id", sa.String(40), primary_key=True),
    sa.Column("public_key", sa.String(60), nullable=False),
    sa.Column("private_key", sa.Text, nullable=False),  # sealed (svckit.secretbox) by the caller
    sa.Column("created_at", sa.Float, nullable=False),
)


@dataclasses.dataclass(frozen=True, slots=True)
class CertRun:
    id: str
    account_id: str
    key_id: str
    status: str
    started_at: dt.datetime
    ends_at: dt.datetime
    fault_every: int
    finished_at: dt.datetime | None = None
    posts: int = 0
    requests: int = 0
    passed: bool | None = None
    probes: tuple[dict[str, Any], ...] = ()
    report: str = ""

    def open_at(self, now: dt.datetime) -> bool:
        return self.status == OPEN and now < self.ends_at


def _run_of(row: Any) -> CertRun:
    return CertRun(
        id=row.id,
        account_id=row.account_id,
        key_id=row.key_id,
        status=row.status,
        started_at=dt.datetime.fromtimestamp(row.started_at, dt.UTC),
        ends_at=dt.datetime.fromtimestamp(row.ends_at, dt.UTC),
        fault_every=int(row.fault_every),
        finished_at=time_of(row.finished_at),
        posts=int(row.posts),
        requests=int(row.requests),
        passed=row.passed,
        probes=tuple(json.loads(row.probes)),
        report=row.report or "",
    )


class CertificationStorage(SqlBase):
    async def cert_start(self, run: CertRun, actor: Actor) -> CertRun:
        """Open ``run`` unless the account has a run open (Conflict); audited."""
        async with self.engine.begin() as conn:
            account = await self._get_account(conn, run.account_id, lock=True)
            if account.open_run_id and account.open_run_ends_at and account.open_run_ends_at > run.started_at:
                raise Conflict(f"account_id: run {account.open_run_id} is open; finish it first")
            await conn.execute(
                runs.insert().values(
                    id=run.id,
                    account_id=run.account_id,
                    key_id=run.key_id,
                    status=OPEN,
                    started_at=run.started_at.timestamp(),
                    ends_at=run.ends_at.timestamp(),
                    fault_every=run.fault_every,
                    posts=0,
                    requests=0,
                    probes="[]",
                )
            )
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == run.account_id)
                .values(
                    cert_run_id=run.id,
                    cert_run_key_id=run.key_id,
                    cert_run_ends_at=run.ends_at.timestamp(),
                    cert_fault_every=run.fault_every,
                )
            )
            after = {"run_id": run.id, "ends_at": run.ends_at.isoformat(), "fault_every": run.fault_every}
            await self._audit(
                conn,
                account_id=run.account_id,
                key_id=run.key_id,
                action="certification.started",
                actor=actor,
                now=run.started_at,
                before={},
                after=after,
            )
            await self._notify(conn, KeyChange("account_updated", "", run.account_id, run.started_at))
        return run

    async def cert_get(self, account_id: str, run_id: str) -> CertRun:
        """The account's run ``run_id``, or its latest when ``run_id`` is ""; NotFound otherwise (a run of
        another account is not found)."""
        stmt = runs.select().where(runs.c.account_id == account_id)
        if run_id:
            stmt = stmt.where(runs.c.id == run_id)
        stmt = stmt.order_by(runs.c.started_at.desc()).limit(1)
        async with self.engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            raise NotFound(f"run_id: no certification run {run_id!r}" if run_id else "no certification run")
        return _run_of(row)

    async def cert_expired(self, now: dt.datetime, limit: int) -> list[CertRun]:
        """Open runs whose end has passed, oldest end first (the housekeeping closes them)."""
        stmt = (
            runs.select()
            .where(runs.c.status == OPEN, runs.c.ends_at <= now.timestamp())
            .order_by(runs.c.ends_at)
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [_run_of(row) for row in await conn.execute(stmt)]

    async def cert_claim(self, account_id: str, run_id: str, now: dt.datetime) -> tuple[int, Fault | None]:
        """Count one POST of the run and give it its fault (svckit.certification.claim_fault, the 401
        spell kept on the run): (its place, the fault); (0, None) when the run is not open."""
        where = sa.and_(
            runs.c.id == run_id,
            runs.c.account_id == account_id,
            runs.c.status == OPEN,
            runs.c.ends_at > now.timestamp(),
        )
        async with self.engine.begin() as conn:
            done = await conn.execute(runs.update().where(where).values(posts=runs.c.posts + 1))
            if not done.rowcount:
                return 0, None
            row = (
                await conn.execute(
                    sa.select(runs.c.posts, runs.c.fault_every, runs.c.unauthorized_until).where(
                        runs.c.id == run_id
                    )
                )
            ).one()
            spell = time_of(row.unauthorized_until)
            fault, after = claim_fault(int(row.posts), int(row.fault_every), now, spell)
            if after != spell and after is not None:
                await conn.execute(
                    runs.update().where(runs.c.id == run_id).values(unauthorized_until=after.timestamp())
                )
        return int(row.posts), fault

    async def cert_record(
        self, account_id: str, run_id: str, records: Sequence[RunRequest], keys: Sequence[str]
    ) -> int:
        """File the records (``keys``: each record's key id) that belong to the open run: its key's, made
        before its end; the rest are dropped. Returns how many were filed."""
        async with self.engine.begin() as conn:
            row = (
                await conn.execute(runs.select().where(runs.c.id == run_id, runs.c.account_id == account_id))
            ).first()
            if row is None or row.status != OPEN:
                return 0
            run = _run_of(row)
            room = max(0, MAX_RUN_REQUESTS - run.requests)
            rows = [
                {
                    "run_id": run_id,
                    "request_id": r.request_id[:64],
                    "method": r.method[:10],
                    "path": r.path[:200],
                    "status": r.status,
                    "error_type": r.error_type[:64],
                    "idempotency_key_digest": r.idempotency_key[:64],
                    "body_digest": r.body[:64],
                    "fault": r.fault.value if r.fault else "",
                    "retry_after": r.retry_after,
                    "probe": r.probe,
                    "received_at": r.received_at.timestamp(),
                }
                for r, key in zip(records, keys, strict=True)
                if key == run.key_id and run.started_at <= r.received_at < run.ends_at
            ][:room]
            if not rows:
                return 0
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            stmt = dialect.insert(run_requests).on_conflict_do_nothing(
                index_elements=["run_id", "request_id"]
            )
            filed = 0
            for values in rows:
                filed += (await conn.execute(stmt.values(**values))).rowcount or 0
            await conn.execute(
                runs.update().where(runs.c.id == run_id).values(requests=runs.c.requests + filed)
            )
        return filed

    async def cert_record_probes(self, account_id: str, run_id: str, probes: Sequence[dict[str, Any]]) -> int:
        async with self.engine.begin() as conn:
            row = (
                await conn.execute(runs.select().where(runs.c.id == run_id, runs.c.account_id == account_id))
            ).first()
            if row is None or row.status != OPEN:
                return 0
            kept = [*json.loads(row.probes), *probes][:200]
            await conn.execute(runs.update().where(runs.c.id == run_id).values(probes=json.dumps(kept)))
        return len(probes)

    async def cert_requests(self, run_id: str) -> list[RunRequest]:
        stmt = (
            run_requests.select().where(run_requests.c.run_id == run_id).order_by(run_requests.c.received_at)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            RunRequest(
                request_id=r.request_id,
                method=r.method,
                path=r.path,
                status=r.status,
                received_at=dt.datetime.fromtimestamp(r.received_at, dt.UTC),
                error_type=r.error_type,
                idempotency_key=r.idempotency_key_digest,
                body=r.body_digest,
                fault=Fault(r.fault) if r.fault else None,
                retry_after=r.retry_after,
                probe=r.probe,
            )
            for r in rows
        ]

    async def cert_finish(
        self, run: CertRun, passed: bool, report: str, actor: Actor, now: dt.datetime
    ) -> CertRun:
        """Close the run with its report; a passing one certifies the account. Audited."""
        async with self.engine.begin() as conn:
            await self._get_account(conn, run.account_id, lock=True)
            done = await conn.execute(
                runs.update()
                .where(runs.c.id == run.id, runs.c.status == OPEN)
                .values(status=FINISHED, finished_at=now.timestamp(), passed=passed, report=report)
            )
            if not done.rowcount:
                raise Conflict(f"run_id: run {run.id} is already finished")
            values: dict[str, Any] = {"cert_run_id": None, "cert_run_key_id": None, "cert_run_ends_at": None}
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == run.account_id, accounts.c.cert_run_id == run.id)
                .values(**values)
            )
            if passed:
                await conn.execute(
                    accounts.update()
                    .where(accounts.c.id == run.account_id)
                    .values(certified_at=now.timestamp())
                )
            await self._audit(
                conn,
                account_id=run.account_id,
                key_id=run.key_id,
                action="certification.finished",
                actor=actor,
                now=now,
                before={},
                after={"run_id": run.id, "passed": passed},
            )
            await self._notify(conn, KeyChange("account_updated", "", run.account_id, now))
        return dataclasses.replace(run, status=FINISHED, finished_at=now, passed=passed, report=report)

    async def cert_signing_keys(self) -> list[tuple[str, str, str]]:
        """(key id, public key, sealed private key) of every report-signing key, newest first."""
        stmt = signing_keys.select().order_by(signing_keys.c.created_at.desc())
        async with self.engine.connect() as conn:
            return [(r.key_id, r.public_key, r.private_key) for r in (await conn.execute(stmt)).all()]

    async def cert_add_signing_key(self, key_id: str, public: str, sealed: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            await conn.execute(
                dialect.insert(signing_keys)
                .values(key_id=key_id, public_key=public, private_key=sealed, created_at=now.timestamp())
                .on_conflict_do_nothing(index_elements=["key_id"])
            )

"""Wiring: storage, change fan-out, cache, last-used flush, outbox relay, request log purge and the gRPC
server."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import os
import sys
import uuid
from collections.abc import Sequence

import grpc
from grpc_health.v1.health import aio as health_aio

from authsvc._certify_close import CLOSE_INTERVAL, RunCloser
from authsvc._identity import IdentityServicer
from authsvc._identity_sql import IdentityRepository
from authsvc._known_keys import MAX_KNOWN, SUFFIX, KnownKeys, SoleWriter
from authsvc._lastused import FLUSH_INTERVAL, LastUsed
from authsvc._outbox import BACKOFF_CAP, POLL_INTERVAL, OutboxRelay
from authsvc._service import AuthServicer
from authsvc._service_requests import RequestLogPurge
from authsvc._service_usage_counts import UsagePrune
from authsvc._sql import SqlRepository
from authsvc._sql_certify import signing_keys
from authsvc._sql_tables import users
from authsvc._traffic_alerts import INTERVAL as TRAFFIC_INTERVAL
from authsvc._traffic_alerts import TrafficAlerts, booking_counter
from authsvc._usage_rules import RETENTION, Retention
from authsvc._watch import ChangeHub, PgListener, channel_name
from authsvc.migrations import SCHEMA as AUTH_SCHEMA
from svckit import addresses, runner, tracing
from svckit.apikeys import DEFAULT_BRAND, KEY_PREFIXES_HELP, configure_prefixes
from svckit.clients import HooksClient
from svckit.clock import Clock
from svckit.db import asyncpg_dsn, create_engine, is_postgres, normalize_url, schema_of
from svckit.flags import FlagParser, add_flag, env_name
from svckit.grpc_server import start_server, stop_server
from svckit.logs import setup_logging
from svckit.metrics import serve_metrics
from svckit.migrations import SchemaError, add_migrate_command, run_migrate
from svckit.readiness import PROBE_INTERVAL, DatabaseHealth
from svckit.reseal import OldKeyGauge, SealedColumn, add_reseal_command, run_reseal
from svckit.runner import (
    ServeConfig,
    add_serve_args,
    freeze_startup,
    print_ready,
    run_until_signal,
    stop_signals,
)
from svckit.secretbox import SealingKeyError, SecretBox, keys_from
from svckit.tls import Tls
from svckit.tlsflags import add_tls_args, tls_from_args
from travel.auth.v1 import auth_pb2, auth_pb2_grpc, identity_pb2, identity_pb2_grpc

log = logging.getLogger(__name__)

SERVICE = "authsvc"
DATABASE = "sqlite+aiosqlite:///var/authsvc.db"
SECRETS_KEY_ENV = "AUTHSVC_SECRETS_KEY"
SECRETS_KEY_HELP = (
    "file holding the base64url AES-256 key that seals portal users' TOTP seeds at rest "
    f"(or the key itself in {SECRETS_KEY_ENV}); without it TOTP enrolment is refused. A rotation: several "
    "files, comma-separated (or the flag repeated), newest first: the first seals, every one opens "
    '(docs/operations.md "Sealing-key rotation")'
)
# What ``python -m authsvc reseal`` rewrites and the sealed_rows_old_key gauge counts: TOTP seeds.
SEALED_COLUMNS = [
    SealedColumn(users, "id", "totp_seed"),
    SealedColumn(users, "id", "totp_pending_seed"),
    SealedColumn(signing_keys, "key_id", "private_key"),
]

SERVICE_NAME = auth_pb2.DESCRIPTOR.services_by_name["AuthService"].full_name
IDENTITY_SERVICE_NAME = identity_pb2.DESCRIPTOR.services_by_name["IdentityService"].full_name


@dataclasses.dataclass
class AuthServer:
    server: grpc.aio.Server
    port: int
    health: health_aio.HealthServicer
    servicer: AuthServicer
    repo: SqlRepository
    listener: PgListener | None
    relay: OutboxRelay | None
    last_used: LastUsed
    purge: RequestLogPurge
    db_health: DatabaseHealth
    sealed_rows: OldKeyGauge | None = None
    sole_writer: SoleWriter | None = None
    usage_prune: UsagePrune | None = None
    traffic_alerts: TrafficAlerts | None = None
    cert_closer: RunCloser | None = None

    async def stop(self, grace: float = ServeConfig.shutdown_grace) -> None:
        self.servicer.hub.close()
        if self.sealed_rows is not None:
            await self.sealed_rows.stop()
        await self.db_health.stop()
        await stop_server(self.server, self.health, grace)
        if self.relay is not None:
            await self.relay.stop()
        if self.listener is not None:
            await self.listener.stop()
        await self.last_used.stop()
        await self.purge.stop()
        if self.usage_prune is not None:
            await self.usage_prune.stop()
        if self.traffic_alerts is not None:
            await self.traffic_alerts.stop()
        if self.cert_closer is not None:
            await self.cert_closer.stop()
        await self.repo.engine.dispose()
        if self.sole_writer is not None:
            self.sole_writer.close()


async def run_server(
    listen: str,
    database: str,
    *,
    webhookd: str = "",
    tls: Tls | None = None,
    clock: Clock | None = None,
    last_used_interval: float = FLUSH_INTERVAL,
    outbox_backoff_cap: float = BACKOFF_CAP,
    outbox_poll_interval: float = POLL_INTERVAL,
    secrets_key: bytes | Sequence[bytes] | None = None,
    db_probe_interval: float = PROBE_INTERVAL,
    usage_retention: Retention = RETENTION,
    traffic_interval: float = TRAFFIC_INTERVAL,
    cert_close_interval: float = CLOSE_INTERVAL,
) -> AuthServer:
    """Migrate, start the background tasks and serve. Returns the running server (port bound).

    ``tls``: mutual TLS for the server and the outbox relay's calls to webhookd; None is plaintext."""
    engine = create_engine(database)
    origin = uuid.uuid4().hex
    channel = channel_name(schema_of(engine)) if is_postgres(engine) else None
    repo = SqlRepository(engine, channel, origin)
    await repo.migrate()
    hub = ChangeHub()
    listener: PgListener | None = None
    if channel is not None:
        dsn, settings = asyncpg_dsn(normalize_url(database))
        listener = PgListener(dsn, settings, channel, origin, hub)
        await listener.start()
    relay: OutboxRelay | None = None
    if webhookd:
        relay = OutboxRelay(
            repo,
            # Several webhookd addresses: one channel, failing over between them (svckit.clients.channels).
            webhookd,
            tls=tls,
            clock=clock,
            backoff_cap=outbox_backoff_cap,
            poll_interval=outbox_poll_interval,
        )
        relay.start()
    last_used = LastUsed(repo, last_used_interval)
    last_used.start()
    # The request log's records past the retention, hourly (authsvc._requestlog).
    purge = RequestLogPurge(repo, clock)
    purge.start()
    # The usage-count rollups' rows past their retention, hourly (authsvc._usage_rules).
    usage_prune = UsagePrune(repo, clock, usage_retention)
    usage_prune.start()
    # Look-to-book and anomaly alerts, every few minutes (authsvc._traffic_alerts).
    hooks = HooksClient(webhookd, tls) if webhookd else None
    traffic = TrafficAlerts(
        repo,
        booking_counter(hooks) if hooks else None,
        clock,
        traffic_interval,
        on_queued=relay.wakeup.set if relay else lambda: None,
        hooks=hooks,
    )
    if traffic_interval > 0:  # 0: evaluated only when asked (tests walking a FakeClock)
        traffic.start()
    # Unknown keys answered without a read while this is the only authsvc on its SQLite file
    # (authsvc._known_keys); on PostgreSQL other processes add keys this one hears of late.
    sole: SoleWriter | None = None
    known_keys = KnownKeys()
    path = None if is_postgres(engine) else engine.url.database
    if path and path != ":memory:":
        try:
            sole = SoleWriter(path + SUFFIX)
        except OSError as exc:  # every key is read, as on PostgreSQL
            log.warning("unknown keys will each be read", extra={"error": str(exc)})
        else:
            known_keys.alone = sole
            if sole():
                known_keys.load(await repo.key_hashes(MAX_KNOWN + 1))
    servicer = AuthServicer(
        repo,
        hub,
        clock=clock,
        last_used=last_used,
        outbox_wakeup=relay.wakeup if relay else None,
        known_keys=known_keys,
        usage_retention=usage_retention,
    )
    identity = IdentityServicer(IdentityRepository(repo), secrets_key=secrets_key, clock=clock)
    # The report-signing keys' private halves are sealed as TOTP seeds are (same keyring, same reseal).
    servicer.cert_box = identity.box
    # Finishing a run sends the probes and reads the webhook facts from webhookd itself, and runs past
    # their end are closed by housekeeping (authsvc._certify_close).
    servicer.cert_hooks = hooks
    closer = RunCloser(repo, servicer.clock, servicer.close_expired, cert_close_interval)
    if cert_close_interval > 0:  # 0: closed only when asked (tests walking a FakeClock)
        closer.start()
    server, port, health = await start_server(
        listen,
        [
            lambda s: auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, s),
            lambda s: identity_pb2_grpc.add_IdentityServiceServicer_to_server(identity, s),
        ],
        [SERVICE_NAME, IDENTITY_SERVICE_NAME],
        tls,
        # A portal call acts for the user of the session it carries (svckit.portal_calls).
        portal_sessions=identity.portal_user,
    )
    # gRPC health NOT_SERVING while the database does not answer (svckit.readiness).
    db_health = DatabaseHealth(engine, health, [SERVICE_NAME, IDENTITY_SERVICE_NAME], db_probe_interval)
    db_health.start()
    log.info(
        "authsvc serving",
        extra={"port": port, "postgres": channel is not None, "webhookd": webhookd, "mtls": tls is not None},
    )
    running = AuthServer(
        server,
        port,
        health,
        servicer,
        repo,
        listener,
        relay,
        last_used,
        purge,
        db_health,
        sole_writer=sole,
        usage_prune=usage_prune,
        traffic_alerts=traffic,
        cert_closer=closer,
    )
    if identity.box is not None:  # sealed_rows_old_key: seeds not yet under the newest key
        running.sealed_rows = OldKeyGauge(engine, identity.box, SEALED_COLUMNS)
        running.sealed_rows.start()
    return running


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``serve``, each falling back to ``AUTHSVC_<FLAG>`` in the environment."""
    add_serve_args(
        parser, SERVICE, listen=addresses.AUTHSVC, metrics=addresses.AUTHSVC_METRICS, database=DATABASE
    )
    add_tls_args(parser, SERVICE)
    tracing.add_tracing_args(parser, SERVICE)
    add_flag(
        parser,
        "--webhookd",
        env=env_name(SERVICE, "webhookd"),
        default="",
        help=f"webhookd gRPC address HOST:PORT for outbox events (e.g. {addresses.WEBHOOKD}); several "
        "webhookd processes: IP:PORT addresses comma-separated, or one dns:///NAME:PORT resolving to several "
        "(failover); empty keeps events pending in the outbox",
    )
    add_flag(
        parser,
        "--outbox-backoff-cap",
        env=env_name(SERVICE, "outbox_backoff_cap"),
        type=float,
        default=BACKOFF_CAP,
        help="longest wait in seconds between outbox publish retries",
    )
    add_flag(
        parser,
        "--secrets-key-file",
        env=env_name(SERVICE, "secrets_key_file"),
        repeat=True,
        help=SECRETS_KEY_HELP,
    )
    add_flag(
        parser,
        "--key-prefixes",
        env=env_name(SERVICE, "key_prefixes"),
        default=DEFAULT_BRAND,
        help=KEY_PREFIXES_HELP,
    )
    add_flag(
        parser,
        "--last-used-flush",
        env=env_name(SERVICE, "last_used_flush"),
        type=float,
        default=FLUSH_INTERVAL,
        help="seconds between last_used_at flushes",
    )
    # How long each rollup is kept: the minutes in hours, the hours and days in days.
    for grain, unit, default in (
        ("minute", "hours", RETENTION.minute.total_seconds() / 3600),
        ("hour", "days", RETENTION.hour.days),
        ("day", "days", RETENTION.day.days),
    ):
        add_flag(
            parser,
            f"--usage-{grain}-retention",
            env=env_name(SERVICE, f"usage_{grain}_retention"),
            type=float,
            default=default,
            help=f"{unit} the per-{grain} usage counts are kept",
        )


def _secrets_keys(paths: Sequence[str]) -> list[bytes]:
    """The keyring, newest first, from ``--secrets-key-file`` or ``AUTHSVC_SECRETS_KEY``."""
    return keys_from(paths, os.environ.get(SECRETS_KEY_ENV, ""), "--secrets-key-file")


async def serve(args: argparse.Namespace) -> int:
    setup_logging("authsvc", args.log_level)
    configure_prefixes(args.key_prefixes)  # before any key is issued or checked (svckit.apikeys)
    tracing.setup(SERVICE, args.otlp_endpoint)
    metrics_port = serve_metrics(args.metrics_listen) if args.metrics_listen else None
    running = await run_server(
        args.listen,
        args.database,
        webhookd=args.webhookd,
        tls=tls_from_args(args),
        outbox_backoff_cap=args.outbox_backoff_cap,
        last_used_interval=args.last_used_flush,
        secrets_key=_secrets_keys(args.secrets_key_file) or None,
        usage_retention=Retention(
            minute=dt.timedelta(hours=args.usage_minute_retention),
            hour=dt.timedelta(days=args.usage_hour_retention),
            day=dt.timedelta(days=args.usage_day_retention),
        ),
    )
    freeze_startup()
    stop_signals()  # before READY: a SIGTERM on reading it is a graceful stop
    print_ready("authsvc", grpc_port=running.port, metrics_port=metrics_port)
    await run_until_signal(lambda: running.stop(args.shutdown_grace))
    tracing.shutdown()
    log.info("authsvc stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = FlagParser(prog="python -m authsvc", description="The partner key authority")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="serve travel.auth.v1 over gRPC")
    add_arguments(serve_parser)
    add_migrate_command(sub, SERVICE, DATABASE)
    add_reseal_command(sub, SERVICE, DATABASE, SECRETS_KEY_HELP)
    args = parser.parse_args(argv)
    if args.command == "migrate":
        return run_migrate(args, AUTH_SCHEMA)
    if args.command == "reseal":
        try:
            box = SecretBox(_secrets_keys(args.secrets_key_file), key_ids=True)
        except SealingKeyError as exc:
            print(f"authsvc: {exc.message}", file=sys.stderr)
            return 2
        return run_reseal(args, SERVICE, box, SEALED_COLUMNS)
    try:
        return runner.run(serve(args))
    except (SchemaError, ValueError) as exc:  # ValueError: a bad --webhookd address list
        print(f"authsvc: {exc}", file=sys.stderr)
        return 2
    except SealingKeyError as exc:  # a key file missing or malformed: one line, never the key
        print(f"authsvc: {exc.message}", file=sys.stderr)
        return 2

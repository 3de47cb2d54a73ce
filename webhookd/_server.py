"""Wiring: storage, the delivery worker, the mailer, housekeeping and the gRPC server; and ``serve``."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from grpc_health.v1.health import aio as health_aio

from svckit import addresses, runner, tracing
from svckit.clock import Clock, SystemClock
from svckit.db import is_postgres
from svckit.flags import ArgumentError, FlagParser, add_flag, config_default, env_name
from svckit.grpc_server import start_server, stop_server
from svckit.logs import setup_logging
from svckit.metrics import serve_metrics
from svckit.migrations import SchemaError, add_migrate_command, run_migrate
from svckit.outage import OutageLog
from svckit.readiness import PROBE_INTERVAL, DatabaseHealth
from svckit.reseal import OldKeyGauge, add_reseal_command, run_reseal
from svckit.runner import ServeConfig, add_serve_args, print_ready, run_until_signal, stop_signals
from svckit.secretbox import keys_from
from svckit.smtp import SmtpSettings, add_smtp_flags, settings_from_args
from svckit.tls import Tls
from svckit.tlsflags import add_tls_args, tls_from_args
from svckit.webhook_status import DestinationType
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc
from webhookd import _metrics as metrics
from webhookd._accounts import Accounts
from webhookd._client_tls import PlatformCa
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._destinations import Deferred, Destination, Destinations
from webhookd._endpoint_cap import MAX_ENDPOINTS
from webhookd._errors import SecretsKeyError
from webhookd._events import SANDBOX_RETENTION
from webhookd._http import FastTransport
from webhookd._mailer import SENDER, Mailer
from webhookd._notices import NoticeRelay
from webhookd._repository import IDEMPOTENCY_WINDOW
from webhookd._secretbox import SecretBox, new_key
from webhookd._sender import DELIVERY_TIMEOUT, Sender
from webhookd._service import WebhookService
from webhookd._service_events import EventHub
from webhookd._sql import SEALED_COLUMNS, SqlRepository
from webhookd._ssrf import Policy, Resolver, system_resolver
from webhookd.migrations import SCHEMA as WEBHOOKD_SCHEMA

log = logging.getLogger("webhookd")
# Housekeeping passes failed by an outage: one line per 10 s with a count (svckit.outage).
HOUSEKEEPING_OUTAGES = OutageLog(log)

SERVICE = "webhookd"
SECRETS_KEY_ENV = env_name(SERVICE, "secrets_key")
SERVICE_NAME = webhooks_pb2.DESCRIPTOR.services_by_name["WebhookService"].full_name
ATTEMPT_RETENTION = dt.timedelta(days=30)
SECRETS_KEY_HELP = (
    "file holding the key that seals signing secrets at rest (or the key itself in env "
    f"{SECRETS_KEY_ENV}); make one with `python -m webhookd new-secrets-key`. A rotation: several files, "
    "comma-separated (or the flag repeated), newest first: the first seals, every one opens "
    '(docs/operations.md "Sealing-key rotation")'
)


@dataclass
class Config:
    database: str = "sqlite+aiosqlite:///var/webhookd.db"
    listen: str = addresses.WEBHOOKD
    policy: Policy = field(default_factory=Policy)
    ca_bundle: str | None = None
    smtp: SmtpSettings | None = None
    authsvc: str = ""
    alert_emails: list[str] = field(default_factory=list)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    delivery_timeout: float = DELIVERY_TIMEOUT
    purge_interval: float = 3600.0
    stats_interval: float = 5.0
    mail_retry_seconds: float = 30.0
    # The portal's public URL: alert e-mails link the endpoint's page there (--portal-url).
    portal_url: str = addresses.PORTAL_URL
    # AES-256 key sealing signing secrets at rest (webhookd._secretbox), or a keyring, newest first (the
    # first seals, every one opens: a rotation); None stores them in the clear.
    secrets_key: bytes | Sequence[bytes] | None = field(default=None, repr=False)
    # Mutual TLS for the gRPC server and the call to authsvc (svckit.tls); None is plaintext.
    tls: Tls | None = field(default=None, repr=False)
    # How often the gRPC health looks at the database (svckit.readiness).
    db_probe_interval: float = PROBE_INTERVAL
    # Every delivery (and OAuth2 token request) through this HTTP CONNECT proxy, (host, port): the
    # receivers see its address (--egress-proxy; docs/operations.md "Fixed source addresses").
    egress_proxy: tuple[str, int] | None = None
    # The CA issuing accounts' client certificates for receivers that require mutual TLS.
    client_ca: PlatformCa | None = field(default=None, repr=False)
    # Webhook endpoints an account may have per environment (webhookd._endpoint_cap).
    max_endpoints: int = MAX_ENDPOINTS


def make_transport(config: Config, resolver: Resolver = system_resolver) -> FastTransport:
    return FastTransport(
        config.policy, ca_bundle=config.ca_bundle, resolver=resolver, proxy=config.egress_proxy
    )


def make_client(config: Config, transport: FastTransport) -> httpx.AsyncClient:
    """Keep-alive pooled client whose connections all pass the SSRF guard."""
    return httpx.AsyncClient(
        transport=transport,
        timeout=httpx.Timeout(config.delivery_timeout),
        follow_redirects=False,
    )


def broker_destinations(sender: Sender, policy: Policy, resolver: Resolver, timeout: float) -> Destinations:
    """Every destination type's sender: http's, and the brokers' (``webhookd._destinations``)."""

    def amqp() -> Destination:
        from webhookd._amqp import AmqpDestination

        return AmqpDestination(policy, resolver, timeout)

    def nats() -> Destination:
        from webhookd._nats import NatsDestination

        return NatsDestination(policy, resolver, timeout)

    return Destinations(sender, {DestinationType.AMQP: Deferred(amqp), DestinationType.NATS: Deferred(nats)})


# Seconds a delivery in flight at SIGTERM may finish in; the rest are handed back (docs/webhooks.md).
SEND_GRACE = 0.5


@dataclass
class Webhookd:
    server: grpc.aio.Server
    port: int
    health: health_aio.HealthServicer
    repo: SqlRepository
    service: WebhookService
    worker: DeliveryWorker
    mailer: Mailer
    client: httpx.AsyncClient
    tasks: list[asyncio.Task[None]]
    owns_client: bool
    accounts: Accounts | None = None
    db_health: DatabaseHealth | None = None
    notices: NoticeRelay | None = None
    sealed_rows: OldKeyGauge | None = None

    async def stop(self, grace: float = ServeConfig.shutdown_grace) -> None:
        """Within about ``SEND_GRACE`` of SIGTERM: streams end first (they never finish on their own), then
        the gRPC server's running calls (``grace`` at most) and the worker's sends in flight (``SEND_GRACE``
        at most, the rest handed back for another process) stop side by side."""
        if self.sealed_rows is not None:
            await self.sealed_rows.stop()
        if self.db_health is not None:
            await self.db_health.stop()
        await self.service.hub.close()
        await asyncio.gather(
            stop_server(self.server, self.health, grace), self.worker.stop(min(grace, SEND_GRACE))
        )
        await self.mailer.stop()
        if self.notices is not None:
            await self.notices.stop()
        for task in self.tasks:
            if task.get_name() == "housekeeping":
                task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.worker.destinations.close()  # the broker connections
        if self.owns_client:
            await self.client.aclose()
        if self.accounts is not None:
            await self.accounts.close()
        await self.repo.close()


async def housekeeping(
    repo: SqlRepository, clock: Clock, config: Config, on_adopted: Callable[[], None] = lambda: None
) -> None:
    """Queue gauges every few seconds, and the deliveries an older release's processes queued during a
    rolling upgrade adopted (``Queue.adopt``; ``on_adopted`` wakes the worker); every ``purge_interval``
    purge attempts older than 30 days (the sandbox's older than ``SANDBOX_RETENTION``, 7 days)."""
    last_purge: dt.datetime | None = None
    while True:
        now = clock.now()
        try:
            stats = await repo.stats(now)
            metrics.QUEUE_DEPTH.set(stats.queue_depth)
            metrics.OLDEST_OVERDUE.set(stats.oldest_overdue_seconds)
            metrics.LEASE_EXPIRED.set(stats.lease_expired)
            adopted = await repo.queue.adopt(now)
            if adopted:
                on_adopted()
                log.info("queued deliveries an older release queued", extra={"adopted": adopted})
            if last_purge is None or (now - last_purge).total_seconds() >= config.purge_interval:
                purged = await repo.purge_attempts(now - ATTEMPT_RETENTION)
                purged += await repo.purge_sandbox_attempts(now - SANDBOX_RETENTION)
                # Delivery counts past their grain's retention (webhookd._delivery_counts).
                purged += await repo.purge_delivery_counts(now)
                await repo.purge_idempotency(now - IDEMPOTENCY_WINDOW)
                # Polling endpoints: what no consumer committed within the retention fails (docs/webhooks.md
                # "Polling"), and lease rows a day past their expiry go.
                expired = await repo.polls.expire(now - ATTEMPT_RETENTION, now)
                if expired:
                    log.info("polled deliveries past the retention failed", extra={"failed": expired})
                last_purge = now
                if purged:
                    log.info("purged old attempts", extra={"purged": purged})
        except Exception as exc:
            if HOUSEKEEPING_OUTAGES.count(exc) is None:  # an outage: the summary line, no traceback
                log.exception("housekeeping failed")
        await asyncio.sleep(config.stats_interval)


async def run_server(
    config: Config,
    *,
    clock: Clock | None = None,
    client: httpx.AsyncClient | None = None,
    resolver: Resolver = system_resolver,
    start_worker: bool = True,
) -> Webhookd:
    """Migrate, start the worker, mailer and housekeeping, and serve gRPC. Returns the running service."""
    clock = clock or SystemClock()
    repo = await SqlRepository.open(config.database, SecretBox(config.secrets_key))
    try:
        sealed = await repo.seal_secrets()
    except Exception:
        await repo.close()
        raise
    if sealed:
        log.info("sealed signing secrets stored in the clear", extra={"endpoints": sealed})
    if config.secrets_key is None:
        log.warning("no --secrets-key-file / WEBHOOKD_SECRETS_KEY: signing secrets are stored in the clear")
    released = await repo.queue.release_leases(clock.now())  # on SQLite (one process): a predecessor's
    if released:
        log.info("released leases of a previous run", extra={"released": released})
    owns_client = client is None
    if client is None:
        transport = make_transport(config, resolver)
        client = make_client(config, transport)
        sender = Sender(client, config.delivery_timeout, direct=transport)
    else:
        sender = Sender(client, config.delivery_timeout)
    destinations = broker_destinations(sender, config.policy, resolver, config.delivery_timeout)
    sender.client_ca = config.client_ca
    # Several authsvc addresses: one channel, failing over between them (svckit.clients.channels).
    accounts = Accounts(config.authsvc, config.tls) if config.authsvc else None
    lookup = accounts.alert_recipients if accounts is not None else None
    mailer = Mailer(
        repo,
        clock,
        config.smtp,
        lookup=lookup,
        fallback=config.alert_emails,
        retry_seconds=config.mail_retry_seconds,
        portal_url=config.portal_url,
    )
    relay = NoticeRelay(repo, clock, on_alerts=mailer.wake)
    worker = DeliveryWorker(
        repo.queue, destinations, clock, config.worker, on_alerts=mailer.wake, on_notices=relay.wake
    )
    relay.on_published = worker.wake
    service = WebhookService(
        repo,
        clock,
        destinations,
        policy=config.policy,
        resolver=resolver,
        worker=worker,
        hub=EventHub(),
        account_mode=accounts.mode if accounts is not None else None,
        max_endpoints=config.max_endpoints,
    )
    service.on_alerts = mailer.wake
    server, port, health = await start_server(
        config.listen,
        [lambda s: webhooks_pb2_grpc.add_WebhookServiceServicer_to_server(service, s)],
        [SERVICE_NAME],
        config.tls,
        # A portal call acts for the user of the session it carries, as authsvc resolves it; without
        # --authsvc the portal's calls are refused (svckit.portal_calls).
        portal_sessions=accounts.portal_user if accounts is not None else None,
    )
    db_health = DatabaseHealth(repo.engine, health, [SERVICE_NAME], config.db_probe_interval)
    db_health.start()
    tasks = [asyncio.create_task(mailer.run(), name="mailer")]
    tasks.append(asyncio.create_task(relay.run(), name="notices"))
    tasks.append(asyncio.create_task(housekeeping(repo, clock, config, worker.wake), name="housekeeping"))
    if start_worker:
        tasks.append(asyncio.create_task(worker.run(), name="worker"))
    log.info(
        "webhookd serving",
        extra={
            "port": port,
            "postgres": is_postgres(repo.engine),
            "allow_private_targets": config.policy.allow_private,
            "allow_http": config.policy.allow_http,
            "worker": worker.owner,
            "mtls": config.tls is not None,
        },
    )
    app = Webhookd(
        server, port, health, repo, service, worker, mailer, client, tasks, owns_client, accounts, db_health
    )
    app.notices = relay
    # sealed_rows_old_key: endpoints whose secrets are not yet under the newest key (a rotation's progress).
    app.sealed_rows = OldKeyGauge(repo.engine, repo.box, SEALED_COLUMNS)
    app.sealed_rows.start()
    return app


def _host_port(value: str, flag: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise SystemExit(f"{flag}: expected HOST:PORT, got {value!r}")
    return host, int(port)


def _smtp_address(text: str) -> str:
    """``--smtp``: HOST:PORT, or empty for no mail."""
    host, _, port = text.rpartition(":")
    if text and (not host or not port.isdigit()):
        raise ArgumentError("expected HOST:PORT")
    return text


def _seconds(text: str) -> float:
    """A number of seconds more than 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ArgumentError("expected a number of seconds more than 0")
    return value


# The delivery worker's flags, in --help order: (flag, the WorkerConfig field it sets and defaults to, type,
# help). config_from_args builds the WorkerConfig from the same rows.
WORKER_FLAGS: tuple[tuple[str, str, type[int] | type[float], str], ...] = (
    ("concurrency", "concurrency", int, "live deliveries in flight at once"),
    (
        "sandbox-concurrency",
        "sandbox_concurrency",
        int,
        "sandbox deliveries in flight at once (a pool of their own, never taken from --concurrency)",
    ),
    ("endpoint-concurrency", "per_endpoint", int, "deliveries in flight at once to any one endpoint"),
    (
        "breaker-threshold",
        "breaker_threshold",
        int,
        "consecutive sends with no HTTP response that open an endpoint's circuit breaker",
    ),
    (
        "breaker-interval",
        "breaker_interval",
        float,
        "seconds between probes of an endpoint whose circuit breaker is open",
    ),
    ("batch-size", "batch_size", int, "deliveries claimed per transaction"),
    ("lease-seconds", "lease_seconds", float, "how long a claimed delivery stays reserved to this process"),
    ("poll-seconds", "poll_seconds", float, "wait between looks for due deliveries (doubled while none is)"),
    (
        "idle-max-seconds",
        "idle_max_seconds",
        float,
        "longest wait between looks while no delivery is due (a publish here wakes the worker at once)",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """``serve`` and ``new-secrets-key``; every ``serve`` flag falls back to ``WEBHOOKD_<FLAG>`` in the
    environment and defaults to the field of ``Config`` (or ``WorkerConfig``) it sets."""
    parser = FlagParser(prog="python -m webhookd", description="Webhook delivery service")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve travel.webhooks.v1 over gRPC and deliver webhooks")
    add_serve_args(
        serve,
        SERVICE,
        listen=config_default(Config, "listen"),
        metrics=addresses.WEBHOOKD_METRICS,
        database=config_default(Config, "database"),
    )
    add_tls_args(serve, SERVICE)
    tracing.add_tracing_args(serve, SERVICE)

    def flag(name: str, **kwargs: Any) -> None:
        add_flag(serve, f"--{name}", env=env_name(SERVICE, name), **kwargs)

    flag(
        "allow-private-targets",
        switch=True,
        help="allow private, loopback and link-local targets (development and tests only)",
    )
    flag("allow-http", switch=True, help="allow plain http:// endpoint URLs (development and tests only)")
    flag(
        "ca-bundle",
        default=config_default(Config, "ca_bundle"),
        help="PEM file of CAs to verify endpoints against (default: the system store)",
    )
    flag(
        "smtp",
        type=_smtp_address,
        default="",
        help="SMTP server HOST:PORT for alert e-mails (failing, disabled)",
    )
    flag("smtp-from", default=SENDER, help="alert sender address")
    add_smtp_flags(serve, SERVICE)
    flag(
        "portal-url",
        default=config_default(Config, "portal_url"),
        help="the portal's public URL, linked from alert e-mails (the portal's --public-url)",
    )
    flag(
        "authsvc",
        default=config_default(Config, "authsvc"),
        help=f"authsvc gRPC HOST:PORT (e.g. {addresses.AUTHSVC}), to look up who an account's alerts go to "
        "(its portal owners and admins and extra addresses); several authsvc processes: IP:PORT addresses "
        "comma-separated, or one dns:///NAME:PORT resolving to several (failover)",
    )
    flag(
        "alert-email",
        repeat=True,
        default=config_default(Config, "alert_emails"),
        help="address(es) alerted when authsvc is not configured or knows no recipient",
    )
    flag(
        "secrets-key-file",
        repeat=True,
        help=SECRETS_KEY_HELP,
    )
    for name, setting, kind, text in WORKER_FLAGS:
        flag(name, type=kind, default=config_default(WorkerConfig, setting), help=text)
    flag(
        "delivery-timeout",
        type=_seconds,
        default=config_default(Config, "delivery_timeout"),
        help="seconds to wait for an endpoint's response",
    )
    flag(
        "egress-proxy",
        default="",
        help="HOST:PORT of an HTTP CONNECT proxy every delivery and OAuth2 token request goes through "
        '(receivers then see the proxy\'s addresses: docs/operations.md "Fixed source addresses")',
    )
    flag(
        "max-endpoints",
        type=int,
        default=config_default(Config, "max_endpoints"),
        help="webhook endpoints an account may have per environment (more: 409 conflict)",
    )
    flag("client-ca-cert", default="", help="PEM certificate of the CA issuing accounts' client certificates")
    flag("client-ca-key", default="", help="PEM private key of that CA (with --client-ca-cert)")
    commands.add_parser("new-secrets-key", help="print a new key for --secrets-key-file")
    add_migrate_command(commands, SERVICE, config_default(Config, "database"))
    add_reseal_command(commands, SERVICE, config_default(Config, "database"), SECRETS_KEY_HELP)
    return parser


def _secrets_keys(args: argparse.Namespace) -> list[bytes]:
    """The keyring from ``--secrets-key-file`` (files, newest first) or ``WEBHOOKD_SECRETS_KEY``."""
    env_text = os.environ.get(SECRETS_KEY_ENV, "")
    try:
        return keys_from(args.secrets_key_file or [], env_text, "--secrets-key-file", SecretsKeyError)
    except SecretsKeyError as exc:
        raise SystemExit(f"webhookd: {exc.message}") from None


def _secrets_key(args: argparse.Namespace) -> list[bytes] | None:
    """The keys sealing signing secrets at rest. Required: only a development run that says so
    (--insecure-dev) may keep them in the clear."""
    key = _secrets_keys(args) or None
    if key is None and not args.insecure_dev:
        raise SystemExit(
            f"webhookd: signing secrets are sealed at rest: give --secrets-key-file or {SECRETS_KEY_ENV} "
            "(make one with `python -m webhookd new-secrets-key`), or --insecure-dev for a development run"
        )
    return key


def config_from_args(args: argparse.Namespace) -> Config:
    smtp = None
    if args.smtp:
        host, port = _host_port(args.smtp, "--smtp")
        smtp = settings_from_args(args, SERVICE, host, port, args.smtp_from)
    if args.lease_seconds <= args.delivery_timeout:
        raise SystemExit("--lease-seconds must be longer than --delivery-timeout")
    return Config(
        database=args.database,
        listen=args.listen,
        policy=Policy(allow_http=args.allow_http, allow_private=args.allow_private_targets),
        ca_bundle=args.ca_bundle or None,
        smtp=smtp,
        authsvc=args.authsvc,
        alert_emails=list(args.alert_email),
        portal_url=args.portal_url,
        worker=WorkerConfig(
            **{setting: getattr(args, name.replace("-", "_")) for name, setting, _, _ in WORKER_FLAGS}
        ),
        delivery_timeout=args.delivery_timeout,
        secrets_key=_secrets_key(args),
        tls=tls_from_args(args),
        egress_proxy=_host_port(args.egress_proxy, "--egress-proxy") if args.egress_proxy else None,
        client_ca=_client_ca(args),
        max_endpoints=args.max_endpoints,
    )


def _client_ca(args: argparse.Namespace) -> PlatformCa | None:
    if bool(args.client_ca_cert) != bool(args.client_ca_key):
        raise SystemExit("--client-ca-cert and --client-ca-key go together")
    if not args.client_ca_cert:
        return None
    try:
        return PlatformCa.from_files(args.client_ca_cert, args.client_ca_key)
    except (OSError, ValueError) as exc:
        raise SystemExit(
            f"--client-ca-cert/--client-ca-key: not a usable CA ({type(exc).__name__})"
        ) from None


async def serve(args: argparse.Namespace) -> None:
    config = config_from_args(args)
    tracing.setup(SERVICE, args.otlp_endpoint)
    metrics_port = serve_metrics(args.metrics_listen) if args.metrics_listen else 0
    app = await run_server(config)
    runner.freeze_startup()
    stop_signals()  # before READY: a SIGTERM on reading it is a graceful stop
    print_ready(SERVICE, grpc_port=app.port, metrics_port=metrics_port)
    await run_until_signal(lambda: app.stop(args.shutdown_grace))
    tracing.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "new-secrets-key":
        print(new_key())
        return 0
    if args.command == "migrate":
        return run_migrate(args, WEBHOOKD_SCHEMA)
    if args.command == "reseal":
        return run_reseal(args, SERVICE, SecretBox(_secrets_keys(args)), SEALED_COLUMNS)
    setup_logging(SERVICE, args.log_level)
    try:
        runner.run(serve(args))
    except SecretsKeyError as exc:
        log.error("webhookd could not start", extra={"error": exc.message})
        print(f"webhookd: {exc.message}", file=sys.stderr)
        return 2
    except (SchemaError, ValueError) as exc:  # ValueError: a bad --authsvc address list
        print(f"webhookd: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

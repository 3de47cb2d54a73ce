"""The bench's phases, run in the order of ``PHASES``: each reads what it needs from the ``Bench`` (the run's
receivers, scratch folder, options and what earlier phases measured) and appends its rows. A new phase is
a function of a ``Bench`` added to ``PHASES`` (with ``enabled`` when an option turns it off); it may read
the results earlier phases left on the ``Bench`` (``rates``, ``lags``, ``due``)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from benchwebhooks.brokers import ENDPOINTS, amqp_rates, nats_rates
from benchwebhooks.calibration import CPU_PER_POST, plain_posts, sqlite_commits
from benchwebhooks.floor import bare_durable, bare_durable_postgres
from benchwebhooks.postgres import postgres_phase
from benchwebhooks.report import cost_line, pct, ratio_line, spread
from benchwebhooks.service import service_phase
from benchwebhooks.worker import run_phase
from webhookd._delivery import WorkerConfig

# A row of the first table: (metric, value). A row of the second: (store, deliveries/s, lag p99 in s,
# worker CPU s per delivery, database server CPU s per delivery or None when it is the worker's).
Row = tuple[str, str]
StoreRow = tuple[str, float, float, float, float | None]


@dataclass
class Bench:
    args: argparse.Namespace
    port: int  # the healthy receiver's
    ca_path: str
    folder: str  # scratch: every database file of the run
    cfg: WorkerConfig
    hostile: list[str]  # the hostile endpoints' URLs (empty: no isolation phase)
    rows: list[Row] = field(default_factory=list)
    headline: list[Row] = field(default_factory=list)  # each durable/plain ratio of the run, printed first
    plains: list[float] = field(default_factory=list)  # every plain-POST calibration run's rate
    stores: list[StoreRow] = field(default_factory=list)
    # What the throughput and lag phases measured, for the phases after them.
    rates: list[float] = field(default_factory=list)  # durable deliveries/s of each trial's burst
    floor_rates: list[float] = field(default_factory=list)  # the SQLite floor's deliveries/s (``floor``)
    hostile_rates: list[float] = field(default_factory=list)  # the same bursts with the hostile ones
    worker_cpu: float = 0.0  # worker CPU s per delivery, median burst
    due: list[dt.datetime] = field(default_factory=list)  # the lag phase's due times
    lags: list[float] = field(default_factory=list)  # the lag phase's due->send lags, s

    def db(self, name: str) -> str:
        return f"sqlite+aiosqlite:///{self.folder}/{name}.db"


@dataclass(frozen=True)
class Phase:
    name: str
    run: Callable[[Bench], Awaitable[None]]
    enabled: Callable[[argparse.Namespace], bool] = lambda _args: True


async def throughput(b: Bench) -> None:
    """Calibration, the storage ceiling, then the burst in trials (each with its plain POSTs, and with the
    hostile endpoints' deliveries due too when there are any)."""
    args, cfg = b.args, b.cfg
    commits = sqlite_commits(f"{b.folder}/commits.db")
    now = dt.datetime.now(dt.UTC)
    el0, _l, n0, cpu0, _b, _t = await run_phase(
        b.db("storage"), b.port, b.ca_path, [now] * args.deliveries, cfg, 120, False
    )
    # Plain POSTs and the durable burst alternate, so each pair sees the machine in the same state.
    plains: list[float] = []
    bursts: list[tuple[float, int, float, float, dict[str, float]]] = []
    # The one endpoint takes at most ``per_endpoint`` sends in flight (issue 21's isolation): the same burst
    # with the cap at the pool's size shows what the cap costs (an account still holds at most its share).
    uncapped = dataclasses.replace(cfg, per_endpoint=cfg.concurrency)
    uncapped_rates: list[float] = []
    for trial in range(args.trials):
        plain = await plain_posts(b.port, b.ca_path, args.deliveries, args.concurrency)
        plains.append(plain)
        now = dt.datetime.now(dt.UTC)
        el, _lags, done, cpu, busy, threads = await run_phase(
            b.db(f"throughput{trial}"), b.port, b.ca_path, [now] * args.deliveries, cfg, 120
        )
        bursts.append((el, done, cpu, busy, threads))
        now = dt.datetime.now(dt.UTC)
        el, _lags, done, *_rest = await run_phase(
            b.db(f"uncapped{trial}"), b.port, b.ca_path, [now] * args.deliveries, uncapped, 120
        )
        uncapped_rates.append(done / el)
        if b.hostile:  # the same burst right after, with the hostile endpoints' deliveries due too
            now = dt.datetime.now(dt.UTC)
            el, _lags, done, *_rest = await run_phase(
                b.db(f"hostile{trial}"), b.port, b.ca_path, [now] * args.deliveries, cfg, 120, True,
                b.hostile, args.hostile_deliveries,
            )  # fmt: skip
            b.hostile_rates.append(done / el)
    rates = b.rates = [done / el for el, done, *_ in bursts]
    ratios = sorted(r / p * 100 for r, p in zip(rates, plains, strict=True))
    b.plains.extend(plains)
    in_flight = min(cfg.concurrency, int(cfg.concurrency * cfg.account_share))
    b.headline.append(
        (
            f"SQLite, one endpoint, default cap ({cfg.per_endpoint} in flight; goal >= 0.45)",
            ratio_line(rates, plains),
        )
    )
    b.headline.append(
        (
            f"SQLite, one endpoint, cap at the pool ({in_flight} in flight: the account's share)",
            ratio_line(uncapped_rates, plains),
        )
    )
    if b.floor_rates:  # the floor ran first (``--only floor --only throughput``): the worker against it
        floor_rate = statistics.median(b.floor_rates)
        capped, at_pool = (
            statistics.median(rates) / floor_rate,
            statistics.median(uncapped_rates) / floor_rate,
        )
        b.headline.append(
            (
                "SQLite worker / the floor (benchwebhooks.floor), same run: default cap, cap at the pool",
                f"{capped:.2f}, {at_pool:.2f} (floor/s median {floor_rate:,.0f})",
            )
        )
    elapsed, n, cpu1, busy1, threads1 = sorted(bursts, key=lambda t: t[1] / t[0])[len(bursts) // 2]
    b.headline.append(
        (
            "SQLite cost: plain POST's CPU / durable delivery's CPU (worker, all threads)",
            cost_line(statistics.median(CPU_PER_POST), cpu1 / n),
        )
    )
    rows = b.rows
    rows.append(("calibration: plain signed POSTs/s, nothing stored", spread(plains)))
    rows.append(("calibration: SQLite one-row commits/s (WAL, sync=NORMAL)", f"{commits:,.0f}"))
    rows.append(("storage only: claim+sign+commit/s, no network (ceiling)", f"{n0 / el0:,.0f}"))
    rows.append(("  worker CPU per delivery, storage only (all threads)", f"{cpu0 / n0 * 1e6:,.0f} µs"))
    rows.append((f"durable signed deliveries/s (burst of {args.deliveries} due at once)", spread(rates)))
    rows.append(
        (
            "  durable / plain signed POSTs, per trial pair (goal >= 45 %)",
            f"{ratios[len(ratios) // 2]:.0f} % ({ratios[0]:.0f} - {ratios[-1]:.0f})",
        )
    )
    rows.append(
        (f"  the same burst, per-endpoint cap at the pool ({cfg.concurrency})", spread(uncapped_rates))
    )
    b.worker_cpu = cpu1 / n
    rows.append(("  wall time for the burst (median trial)", f"{elapsed:.2f} s"))
    rows.append(("  worker CPU per delivery, with HTTPS (all threads)", f"{cpu1 / n * 1e6:,.0f} µs"))
    for name, seconds in sorted(threads1.items(), key=lambda kv: -kv[1]):
        if seconds * 1e6 / n >= 1:
            rows.append((f"    of which thread {name!r}", f"{seconds / n * 1e6:,.0f} µs"))
    rows.append(("  event-loop thread busy (CPU time / wall time)", f"{busy1 * 100:.0f} %"))


async def lag(b: Bench) -> None:
    """Deliveries coming due at a steady rate below capacity: due->send lag."""
    args = b.args
    start = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5)
    step = dt.timedelta(seconds=1 / args.lag_rate)
    b.due = [start + i * step for i in range(args.lag_deliveries)]
    _e, b.lags, n2, _c, _b, _t = await run_phase(b.db("lag"), b.port, b.ca_path, b.due, b.cfg, 120)
    lags = b.lags
    b.rows.append(
        (
            f"due->send lag p50 ({args.lag_deliveries} due at {args.lag_rate}/s)",
            f"{pct(lags, 50) * 1000:.1f} ms",
        )
    )
    b.rows.append(("due->send lag p99", f"{pct(lags, 99) * 1000:.1f} ms"))
    b.rows.append(("due->send lag max", f"{max(lags) * 1000:.1f} ms" if lags else "n/a"))
    b.rows.append(("deliveries committed in lag phase", f"{n2}"))
    b.stores.append(("SQLite, 1 process", statistics.median(b.rates), pct(lags, 99), b.worker_cpu, None))


async def isolation(b: Bench) -> None:
    """The lag phase without and with the hostile endpoints, in pairs back to back (the machine is
    noisy): medians of p99; and the throughput phase's bursts with them against without."""
    args, due = b.args, b.due
    p99s: tuple[list[float], list[float]] = ([], [])
    lags_h: list[float] = []
    n3 = 0
    for trial in range(args.trials):
        for with_them, out in ((False, p99s[0]), (True, p99s[1])):
            ahead = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5) - due[0]
            _e, lags3, n3, _c, _b, _t = await run_phase(
                b.db(f"lag-{trial}-{with_them}"), b.port, b.ca_path, [t + ahead for t in due], b.cfg, 120,
                True, b.hostile if with_them else (), args.hostile_deliveries,
            )  # fmt: skip
            out.append(pct(lags3, 99))
            lags_h = lags3 if with_them else lags_h
    rows = b.rows
    what = f"{args.hostile} dripping + {args.hostile} silent endpoints of another account"
    rows.append((f"isolation: with {what}", f"{args.hostile_deliveries} deliveries due each"))
    without, with_ = (statistics.median(p) * 1000 for p in p99s)
    pairs = " ".join(f"{x * 1000:.0f}/{y * 1000:.0f}" for x, y in zip(*p99s, strict=True))
    rows.append(
        (
            f"  healthy lag p99 without / with them, {args.trials} pairs (goal < 100 ms)",
            f"{without:.1f} ms / {with_:.1f} ms (pairs: {pairs})",
        )
    )
    rows.append(
        ("  healthy lag max with them (last pair)", f"{max(lags_h) * 1000:.1f} ms" if lags_h else "n/a")
    )
    rows.append(("  healthy deliveries committed in the lag phase with them", f"{n3}"))
    ratios_h = sorted(h / r * 100 for h, r in zip(b.hostile_rates, b.rates, strict=True))
    rows.append(("  burst deliveries/s with them", spread(b.hostile_rates)))
    rows.append(
        (
            "  throughput with / without them (goal >= 90 %)",
            f"{ratios_h[len(ratios_h) // 2]:.0f} % ({ratios_h[0]:.0f} - {ratios_h[-1]:.0f})",
        )
    )


async def calibration(b: Bench) -> None:
    """The plain-POST ceiling alone (``--only calibration``): signed POSTs with nothing stored, in trials,
    to set beside a PostgreSQL burst of the same run."""
    args = b.args
    plains = [
        await plain_posts(b.port, b.ca_path, args.deliveries, args.concurrency) for _ in range(args.trials)
    ]
    b.plains.extend(plains)
    b.rows.append(("calibration: plain signed POSTs/s, nothing stored", spread(plains)))


async def floor(b: Bench) -> None:
    """The floor (``--only floor``, ``benchwebhooks.floor``): the least a durable delivery costs here, in
    trials alternating with plain POSTs, on SQLite and (``--postgres``) PostgreSQL; its ratio bounds what
    any durable worker reaches on this machine."""
    args = b.args
    plains: list[float] = []
    floors: dict[bool, list[float]] = {False: [], True: []}  # by: the writer in a process of its own
    cpus: dict[bool, list[float]] = {False: [], True: []}
    for trial in range(args.trials):
        plains.append(await plain_posts(b.port, b.ca_path, args.deliveries, args.concurrency))
        for process in (False, True):
            rate, cpu = await bare_durable(
                b.db(f"floor{trial}{process}"), b.port, b.ca_path, args.deliveries, args.concurrency, process
            )
            floors[process].append(rate)
            cpus[process].append(cpu)
    b.plains.extend(plains)
    b.floor_rates = floors[False]
    plain_cpu = statistics.median(CPU_PER_POST[-args.trials :])
    for process, how in ((False, "writer thread, as webhookd"), (True, "writer in a process of its own")):
        b.headline.append((f"SQLite floor ({how}) / plain POSTs", ratio_line(floors[process], plains)))
        b.headline.append(
            (
                f"  by CPU: plain POST's / the floor's ({how})",
                cost_line(plain_cpu, statistics.median(cpus[process])),
            )
        )
        b.rows.append((f"floor: bare durable signed deliveries/s ({how})", spread(floors[process])))
        b.rows.append(
            ("  its CPU per delivery (every thread)", f"{statistics.median(cpus[process]) * 1e6:,.0f} µs")
        )
    if not args.postgres:
        return
    pg_plains: list[float] = []
    pg_floors: list[tuple[float, float, float]] = []
    for _ in range(args.trials):
        pg_plains.append(await plain_posts(b.port, b.ca_path, args.deliveries, args.concurrency))
        pg_floors.append(
            await bare_durable_postgres(args.postgres, b.port, b.ca_path, args.deliveries, args.concurrency)
        )
    b.plains.extend(pg_plains)
    rates = [f[0] for f in pg_floors]
    client, server = statistics.median(f[1] for f in pg_floors), statistics.median(f[2] for f in pg_floors)
    b.headline.append(
        ("PostgreSQL floor: the bare durable loop, one process / plain POSTs", ratio_line(rates, pg_plains))
    )
    b.rows.append(("floor on PostgreSQL: bare durable signed deliveries/s, one process", spread(rates)))
    b.rows.append(
        (
            "  its CPU per delivery: the loop / the database server",
            f"{client * 1e6:,.0f} µs / {server * 1e6:,.0f} µs",
        )
    )


async def service(b: Bench) -> None:
    rate = await service_phase(b.folder, b.port, b.ca_path, b.args.deliveries, b.cfg)
    b.rows.append(("the same burst through `python -m webhookd serve` (a process)", f"{rate:,.0f}"))


async def postgres(b: Bench) -> None:
    args = b.args
    if not b.due:  # run alone (--only postgres): the lag phase's due times as it would have made them
        start = dt.datetime.now(dt.UTC)
        b.due = [start + i * dt.timedelta(seconds=1 / args.lag_rate) for i in range(args.lag_deliveries)]
    # One endpoint takes at most ``per_endpoint`` sends in flight per process (issue 21's isolation), so a
    # burst to one endpoint measures that cap (sends in flight / their latency), not the system: the
    # goal's figure spreads the burst over ``--pg-endpoints``; the one-endpoint burst is printed beside it.
    one = await postgres_phase(
        args.postgres, b.port, b.ca_path, args.deliveries, b.cfg, args.pg_processes, b.due
    )
    # Plain POSTs right before the burst too: the pair sees the machine in the same state.
    b.plains.append(await plain_posts(b.port, b.ca_path, args.deliveries, args.concurrency))
    pg = await postgres_phase(
        args.postgres, b.port, b.ca_path, args.deliveries, b.cfg, args.pg_processes, b.due, args.pg_endpoints
    )
    b.headline.append(
        (
            f"PostgreSQL, {args.pg_processes} processes, {args.pg_endpoints} endpoints (goal >= 0.50)",
            ratio_line([pg["rate"]], b.plains),
        )
    )
    b.headline.append(
        (
            f"PostgreSQL, {args.pg_processes} processes, one endpoint"
            f" (at most {b.cfg.per_endpoint} in flight per process)",
            ratio_line([one["rate"]], b.plains),
        )
    )
    b.headline.append(
        (
            "PostgreSQL cost: plain POST's CPU / durable delivery's CPU (workers + server)",
            cost_line(statistics.median(CPU_PER_POST), pg["worker_cpu"] + pg["db_cpu"]),
        )
    )
    b.rows.append(
        (
            f"durable signed deliveries/s on PostgreSQL ({args.pg_processes} processes,"
            f" {args.pg_endpoints} endpoints)",
            f"{pg['rate']:,.0f}",
        )
    )
    b.rows.append(
        (
            f"  the same burst to one endpoint (at most {b.cfg.per_endpoint} in flight per process)",
            f"{one['rate']:,.0f} (worker {one['worker_cpu'] * 1e6:,.0f} µs, database"
            f" {one['db_cpu'] * 1e6:,.0f} µs per delivery)",
        )
    )
    b.rows.append(("  lag-phase sends per process", " / ".join(str(x) for x in pg["shares"])))
    updated, hot = pg["updates"]
    b.rows.append(("  wh_deliveries rows updated / of which HOT (no index entry)", f"{updated:,} / {hot:,}"))
    b.stores.append(
        (
            f"PostgreSQL, {args.pg_processes} processes, {args.pg_endpoints} endpoints",
            pg["rate"],
            pct(pg["lags"], 99),
            pg["worker_cpu"],
            pg["db_cpu"],
        )
    )


async def _broker(
    b: Bench, name: str, rates: Callable[[str, int, WorkerConfig], Awaitable[tuple[float, float]]]
) -> None:
    """Durable deliveries/s to a broker against a plain publish loop to it, in trials back to back."""
    args = b.args
    pairs = [
        await rates(b.db(f"{name}{trial}"), args.broker_deliveries, b.cfg) for trial in range(args.trials)
    ]
    durable, plain = [d for d, _p in pairs], [p for _d, p in pairs]
    ratios = sorted(d / p * 100 for d, p in pairs)
    label = {
        "amqp": "RabbitMQ (aio-pika, publisher confirms)",
        "nats": "NATS JetStream (nats-py, publish ack)",
    }
    b.rows.append((f"{name}: plain publish loop/s, {label[name]}, nothing stored", spread(plain)))
    b.rows.append(
        (
            f"{name}: durable deliveries/s ({args.broker_deliveries} due at once over {ENDPOINTS} endpoints)",
            spread(durable),
        )
    )
    b.rows.append(
        (
            f"  {name}: durable / plain publish",
            f"{ratios[len(ratios) // 2]:.0f} % ({ratios[0]:.0f} - {ratios[-1]:.0f})",
        )
    )


async def amqp(b: Bench) -> None:
    await _broker(b, "amqp", amqp_rates)


async def nats_phase(b: Bench) -> None:
    await _broker(b, "nats", nats_rates)


PHASES: tuple[Phase, ...] = (
    Phase("calibration", calibration, lambda args: bool(args.only) and "calibration" in args.only),
    Phase("floor", floor, lambda args: bool(args.only) and "floor" in args.only),
    Phase("throughput", throughput),
    Phase("lag", lag),
    Phase("isolation", isolation, lambda args: bool(args.hostile)),
    Phase("service", service),
    Phase("postgres", postgres, lambda args: bool(args.postgres)),
    Phase("amqp", amqp, lambda args: bool(args.broker_deliveries)),
    Phase("nats", nats_phase, lambda args: bool(args.broker_deliveries)),
)

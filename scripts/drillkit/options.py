"""The drill's flags: where the deployment's database and Redis are, which ports it may use, which phases."""

from __future__ import annotations

import argparse

# Each phase, in the order they run (whatever order --phases names them in).
PHASES = ("release", "kills", "database", "redis", "slow")
PHASE_HELP = {
    "release": "webhookd of the previous release serves first; then this release's migrate runs and each "
    "webhookd is replaced by this release's, one at a time, under traffic",
    "kills": "each process in turn (authsvc, webhookd, edge, x2, then the portal) killed with SIGKILL and "
    "restarted on its port",
    "database": "the database refuses connections (ALTER DATABASE ... ALLOW_CONNECTIONS false, and the "
    "connections it had ended) for --down-database seconds",
    "redis": "the drill's own Redis (redis-server on a free port) stopped for --down seconds, then "
    "started again",
    "slow": "the webhook receiver answers after --slow-receiver seconds while webhookd#1 is killed: what it "
    "was sending is sent again after its lease",
}
DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/test"


def build_parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/drill.py", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = p.add_argument_group("the deployment's dependencies")
    where.add_argument(
        "--database",
        default=DEFAULT_DATABASE,
        help="PostgreSQL URL the drill connects to as an administrator; it creates a database of its own "
        "there (dropped at the end) unless --in-given-database (default: %(default)s)",
    )
    where.add_argument(
        "--in-given-database",
        action="store_true",
        help="run in a schema of the --database URL's own database instead of a database of its own",
    )
    where.add_argument(
        "--refuse-given-database",
        action="store_true",
        help="with --in-given-database, allow the 'database' phase to refuse connections to that database "
        "(every client of it is cut off for --down-database seconds)",
    )
    where.add_argument(
        "--redis",
        default="",
        help="a Redis URL to use (keys under a prefix of the drill's own, removed at the end) instead of a "
        "redis-server the drill starts on a free port; the 'redis' phase needs the drill's own",
    )
    where.add_argument(
        "--base-port",
        type=int,
        default=0,
        help="the processes, their /metrics, the drill's own Redis and Prometheus listen on consecutive "
        "ports from this one (17 + --workers of them); 0: free ports",
    )
    what = p.add_argument_group("what runs")
    what.add_argument(
        "--phases",
        default=",".join(PHASES),
        help="comma-separated, of: "
        + "; ".join(f"{n}: {h}" for n, h in PHASE_HELP.items())
        + " (default: all)",
    )
    what.add_argument("--workers", type=int, default=2, help="edge#2's --workers (edge#1 runs one)")
    what.add_argument("--rate", type=float, default=6.0, help="partner calls a second")
    what.add_argument("--warmup", type=float, default=5.0, help="seconds of traffic before the first phase")
    what.add_argument("--down", type=float, default=3.0, help="seconds a killed process or Redis stays down")
    what.add_argument("--down-database", type=float, default=8.0, help="seconds the database refuses")
    what.add_argument("--settle", type=float, default=6.0, help="seconds after a step before the next")
    what.add_argument(
        "--lease-seconds", type=float, default=20.0, help="webhookd's --lease-seconds (its default: 60)"
    )
    what.add_argument(
        "--receiver-delay", type=float, default=0.25, help="seconds the webhook receiver takes to answer"
    )
    what.add_argument(
        "--slow-receiver",
        type=float,
        default=3.0,
        help="seconds the receiver takes to answer in the 'slow' phase (under webhookd's delivery timeout)",
    )
    what.add_argument(
        "--slow-post",
        type=float,
        default=1.0,
        help="seconds the hotels upstream takes to answer a booking (0: no bookings)",
    )
    what.add_argument(
        "--drain", type=float, default=15.0, help="seconds the drain waits at least after the traffic stops"
    )
    what.add_argument("--timeout", type=float, default=30.0, help="the partner's HTTP timeout in seconds")
    what.add_argument("--keep", action="store_true", help="keep the work directory (logs, CA) and say where")
    return p


def parse(doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    p = build_parser(doc)
    args = p.parse_args(argv)
    names = [n.strip() for n in args.phases.split(",") if n.strip()]
    unknown = [n for n in names if n not in PHASES]
    if unknown or not names:
        p.error(f"--phases: {', '.join(unknown) or '(none)'}: choose among {', '.join(PHASES)}")
    args.phase_list = [n for n in PHASES if n in names]
    if args.workers < 1:
        p.error("--workers: at least 1")
    return args

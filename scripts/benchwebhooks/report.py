"""The bench's two tables: every metric a phase measured, then one line per store."""

from __future__ import annotations

import os
import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchwebhooks.phases import Bench


def spread(values: list[float]) -> str:
    """Median (min - max) of the trials."""
    v = sorted(values)
    if len(v) == 1:
        return f"{v[0]:,.0f}"
    return f"{v[len(v) // 2]:,.0f} ({v[0]:,.0f} - {v[-1]:,.0f})"


def ratio_line(durable: list[float], plains: list[float]) -> str:
    """Durable deliveries/s against the plain signed POSTs of the same run: the ratio of the medians, then
    each durable burst's ratio to the run's slowest and fastest plain run (the machine's noise)."""
    d, p = statistics.median(durable), statistics.median(plains)
    lo, hi = min(durable) / max(plains), max(durable) / min(plains)
    each = ", ".join(f"{x:,.0f}" for x in durable)
    return f"{d / p:.2f} (range {lo:.2f} - {hi:.2f}; durable/s {each}; plain/s median {p:,.0f})"


def cost_line(plain_cpu: float, durable_cpu: float) -> str:
    """The same comparison in CPU seconds (steadier than rates when the machine's speed moves): a plain POST's
    sending CPU against a durable delivery's CPU in webhookd (and its database server), the receiver's share
    left out of both."""
    return f"{plain_cpu / durable_cpu:.2f} ({plain_cpu * 1e6:,.0f} µs / {durable_cpu * 1e6:,.0f} µs)"


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def print_tables(bench: Bench) -> None:
    args, rows, lags = bench.args, bench.rows, bench.lags
    if bench.headline:
        hw = max(len(r[0]) for r in bench.headline)
        print("\nheadline: durable deliveries / plain signed POSTs to the same receiver, same run")
        for name, value in bench.headline:
            print(f"  {name.ljust(hw)} | {value}")
    width = max(len(r[0]) for r in rows)
    mean = f"{statistics.fmean(lags) * 1000:.1f} ms" if lags else "n/a"
    print(
        f"\nwebhookd delivery benchmark (SQLite, HTTPS over loopback, {os.cpu_count()} CPUs, "
        f"concurrency {args.concurrency}, batch {args.batch_size})"
    )
    print(f"{'metric'.ljust(width)} | value")
    print(f"{'-' * width}-+-{'-' * 12}")
    for name, value in rows:
        print(f"{name.ljust(width)} | {value}")
    print(f"{'goal'.ljust(width)} | >= 5,000/s, p99 lag < 1 s (mean lag {mean})")
    print(
        f"\n{'store'.ljust(22)} | {'deliveries/s':>12} | {'lag p99':>9} | {'worker CPU/delivery':>19}"
        f" | {'database server CPU/delivery':>28}"
    )
    for name, rate, p99, cpu, db_cpu in bench.stores:
        db = f"{db_cpu * 1e6:,.0f} µs" if db_cpu is not None else "(in the worker)"
        print(
            f"{name.ljust(22)} | {rate:>12,.0f} | {p99 * 1000:>6.1f} ms | {cpu * 1e6:>16,.0f} µs | {db:>28}"
        )

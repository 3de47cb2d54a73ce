"""What the drill prints, and its exit status: 1 on any loss (an accepted event or a revocation never
delivered), any 500, any answer showing internals, a bad signature, or a revoked key still taken."""

from __future__ import annotations

import collections
import json
import os
import statistics
import time

from drillkit.alertcheck import BASELINE, table, unknown_alerts
from drillkit.operator import LAG_LIMIT, Operator
from drillkit.partner import Partner
from drillkit.phases import Ctx
from drillkit.prom import judge_seen
from drillkit.stack import Hotels
from drillkit.verdict import AFTER_A_LEASE, NOT_AFTER_A_LEASE, duplicate_kind, failures, is_500
from drillkit.watch import Watcher
from svckit.signing import WebhookVerificationError, verify
from webhookd.testing import Received


def key_of(r: Received) -> str:
    """The revoked key's id of an apikey.revoked delivery, else ""."""
    body = json.loads(r.body)
    return str(body["data"].get("keyId", "")) if body.get("type") == "apikey.revoked" else ""


def event_of(r: Received) -> str:
    return str(r.headers.get("x-service-event-id", ""))


def waiting(got: list[Received], partner: Partner, operator: Operator) -> bool:
    """Whether an accepted event or a revocation has no webhook yet."""
    events, revoked = {event_of(r) for r in got}, {key_of(r) for r in got}
    return bool(set(partner.accepted) - events or set(operator.revoked) - revoked)


def _by(counter: collections.Counter[str]) -> str:
    return ", ".join(f"{n} x {k}" for k, n in counter.most_common()) or "none"


def report(
    ctx: Ctx,
    partner: Partner,
    operator: Operator,
    watcher: Watcher,
    got: list[Received],
    secret: str,
    hotels: Hotels,
) -> int:
    lease = ctx.args.lease_seconds
    to_mono = time.monotonic() - time.time()
    deliveries: dict[str, list[float]] = collections.defaultdict(list)
    for r in got:
        deliveries[event_of(r)].append(r.at + to_mono)
    for times in deliveries.values():
        times.sort()
    dup_kind = {e: duplicate_kind(times, lease) for e, times in deliveries.items() if len(times) > 1}
    origin = ctx.windows[0].start
    print()
    print(f"{'window':<26} {'restart s':>9} {'calls':>6} {'1st failed':>10} {'errors':>6} {'dup.':>5}"
          "  partner errors (after the retry); readiness flips")  # fmt: skip
    for w in ctx.windows:
        calls = [c for c in partner.calls if w.start <= c.at < w.end]
        errors = collections.Counter(c.error for c in calls if c.error)
        errors.update(f"operator: {e}" for at, e in operator.errors if w.start <= at < w.end)
        dups = sum(1 for e in dup_kind if w.start <= deliveries[e][0] < w.end)
        seen = [
            f"{f.node} {f.became} +{f.at - w.start:.1f}s" for f in watcher.flips if w.start <= f.at < w.end
        ]
        flips = ["flips: " + ", ".join(seen)] if seen else []
        taken = [x for at, x in operator.lags if w.start <= at < w.end and x > 0]
        if taken:
            flips.insert(0, f"revoked keys still taken: {len(taken)} (up to {max(taken):.1f} s)")
        retried = [c for at, c in operator.retried if w.start <= at < w.end]
        if retried:
            flips.insert(0, "operator calls retried on the other authsvc: " + ", ".join(retried))
        restarted = f"{w.restart_seconds:.1f}" if w.restart_seconds else ""
        first = sum(1 for c in calls if c.first_error)
        print(f"{w.name:<26} {restarted:>9} {len(calls):>6} {first:>10} {sum(errors.values()):>6} {dups:>5}  "
              + _by(errors) + ("; " + ", ".join(flips) if flips else ""))  # fmt: skip
    statuses = collections.Counter(c.status for c in partner.calls if c.error)
    firsts = collections.Counter(c.first_error.split(" (")[0] for c in partner.calls if c.first_error)
    print(f"\npartner errors by status (after the retry): {_by(statuses)}")
    print(f"first tries that failed, by cause: {_by(firsts)}")
    five_hundreds = [c for c in partner.calls if is_500(c.status, c.first_error)]
    leaks = collections.Counter(leak for c in partner.calls for leak in c.leaks)
    print(f"answers of status 500: {len(five_hundreds)}; bodies showing internals: {sum(leaks.values())}"
          + (f" ({_by(leaks)})" if leaks else ""))  # fmt: skip
    sample_ids = {event_of(r) for r in got if not key_of(r)}
    accepted = set(partner.accepted)
    lost = accepted - sample_ids
    print(
        f"sample events: {len(accepted)} accepted (202), {len(accepted - lost)} received, lost {len(lost)}; "
        f"{len(sample_ids - accepted)} received that the partner never saw accepted (its call failed)"
    )
    kinds = collections.Counter(dup_kind.values())
    extra = sum(len(deliveries[e]) - 1 for e in dup_kind)
    print(
        f"duplicated events: {len(dup_kind)} ({extra} extra deliveries): {kinds[AFTER_A_LEASE]} after a "
        f"lease ({lease:g} s: a webhookd died, was stopped or lost its database while sending), "
        f"{kinds[NOT_AFTER_A_LEASE]} not after a lease"
    )
    for e in [e for e, k in dup_kind.items() if k == NOT_AFTER_A_LEASE][:5]:
        times = deliveries[e]
        print(f"  {e}: delivered at " + ", ".join(f"+{t - origin:.1f}s" for t in times))
    revoked_seen = {key_of(r) for r in got} - {""}
    lost_revocations = set(operator.revoked) - revoked_seen
    op_errors = collections.Counter(e for _, e in operator.errors)
    print(
        f"revocations: {len(operator.revoked)} made, {len(operator.revoked) - len(lost_revocations)} "
        f"webhooks received, lost {len(lost_revocations)}; operator errors: {_by(op_errors)}; calls retried "
        f"on the other authsvc: {_by(collections.Counter(c for _, c in operator.retried))}"
    )
    lags = sorted(lag for _, lag in operator.lags)
    if lags:
        p95 = lags[min(len(lags) - 1, int(len(lags) * 0.95))]
        print(
            f"revocation lag (from the revocation to the last answer that still took the key): median "
            f"{statistics.median(lags):.2f} s, p95 {p95:.2f} s, max {lags[-1]:.2f} s over {len(lags)}; "
            f"keys taken after their revocation: {sum(1 for x in lags if x > 0)}; still taken after "
            f"{LAG_LIMIT:g} s: {len(operator.still_accepted)}; neither taken nor refused (503, no answer) "
            f"for {LAG_LIMIT:g} s: {len(operator.unconfirmed)}; answers taking a revoked key, by edge: "
            f"{_by(operator.took)}"
        )
    if operator.still_accepted:  # to look for in the services' logs (--keep)
        print("  still taken after the limit: " + ", ".join(operator.still_accepted))
    print(f"readiness flips: {len(watcher.flips)}")
    for f in watcher.flips:
        print(f"  +{f.at - origin:6.1f}s {f.node:<11} {f.became}")
    bad = 0
    for r in got:
        try:
            verify(r.body, r.headers.get("x-service-signature", ""), secret, now=r.at)
        except WebhookVerificationError:
            bad += 1
    run_twice = sum(1 for k, n in hotels.keys.items() if n > 1 and k in partner.booking_keys)
    print(
        f"bookings: {len(partner.booking_keys)} made, {len(partner.booked)} answered 2xx; the upstream got "
        f"{sum(hotels.keys.values())} for {len(hotels.keys)} Idempotency-Keys ({run_twice} run again after "
        f"a dead edge's claim was taken over)"
    )
    print(f"deliveries: {len(got)}, bad signatures: {bad}")
    for s in ctx.skipped:
        print(f"skipped: {s}")
    mismatches = alerts(ctx)
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    found = failures(
        {
            "lost events": len(lost),
            "lost revocations": len(lost_revocations),
            "500s": len(five_hundreds),
            "bodies showing internals": sum(leaks.values()),
            "bad signatures": bad,
            "revoked keys still accepted": len(operator.still_accepted),
            "alert mismatches": mismatches,
        }
    )
    print("RESULT: " + ("FAILED: " + ", ".join(f"{n} {k}" for k, n in found.items()) if found else "passed"))
    return 1 if found else 0


def alerts(ctx: Ctx) -> int:
    """The alerts' table (drillkit.alertcheck), and how many (phase, alert) pairs were not as expected."""
    sampler = ctx.sampler
    if sampler is None:
        return 0
    phases = [p for p in ctx.args.phase_list if any(w.phase == p for w in ctx.windows)]
    judged = judge_seen(ctx.windows, sampler.seen, phases, sampler.rules)
    print(f"\nalerts' expressions (Prometheus, {sampler.rounds} rounds of evaluation, {sampler.errors} "
          "failed queries): samples seen true / false; 'cleared': false at the phase's end")  # fmt: skip
    for line in table(judged):
        print(f"  {line}")
    missing = unknown_alerts(sampler.rules)
    if missing:
        print(f"  the drill's table names alerts alerts.yml has not: {', '.join(missing)}")
    # Every target scraped in the baseline (a scrape missed under load is no blindness; one never made is).
    healthy = [w for w in ctx.windows if w.phase == BASELINE]
    up = [seen for at, seen in sampler.up if any(w.start <= at < w.end for w in healthy)]
    reached = len(frozenset().union(*up)) if up else 0
    blind = reached < sampler.targets
    why = " (MISMATCH: the baseline proves nothing without them all)" if blind else ""
    missed = sum(1 for seen in up if len(seen) < sampler.targets)
    print(f"  targets scraped in the baseline: {reached} of {sampler.targets} ({missed} of {len(up)} rounds "
          f"saw a scrape missed){why}")  # fmt: skip
    return sum(1 for j in judged if not j.ok) + len(missing) + blind

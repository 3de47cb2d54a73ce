"""Whether the outage alerts tell the truth, judged from what Prometheus answered during the drill: pure (the
table and the verdict), with its table of cases in tests/unit/test_drill_alertcheck.py.

The drill runs a real Prometheus that scrapes every process's /metrics each second and loads
deploy/prometheus/alerts.yml (``drillkit.prom``). Every second it evaluates each rule's ``expr`` through the
query API, not ``ALERTS``: a rule's ``for:`` (1 to 15 minutes) would keep a drill's 3 to 8 s outage from
ever firing, and what the drill can check is the condition the alert waits on.

Two forms of each expression are evaluated:

- **as written** (``rule``): what the alert watches. A ``rate(...[5m])`` stays true for up to 5 minutes
  after the last failure, so this form can say "false before anything happened" (the healthy baseline,
  before the first phase) and "true during the outage", but not "false after the recovery" within a
  drill.
- **short** (``short``): every range ``[5m]``, ``[10m]`` ... replaced by ``[SHORT_RANGE]``: the same
  condition over the last few seconds. Expressions without a range (``database_up == 0``) are the same in
  both forms. This form judges "false again after the recovery" and "never true in a phase that does not
  concern it" (an earlier phase's failures, still inside a 5-minute window, would otherwise be blamed on
  this one).

The verdict per (phase, alert), from ``EXPECT``:

- ``TRUE``: the rule as written seen true at least once in the phase's windows (its outage and the settle
  after it: a scrape each second and an evaluation each second lag the outage by up to 2 s), and the short
  form false at the end of the phase (its ``clear`` window: the drill waits there, up to a limit, until
  every short form is false).
- ``FALSE``: the short form never true in the phase's windows, and false at its end.
- ``MAY``: a side effect the phase may or may not cause (the database phase's 503s count in the edge's 5xx
  ratio; an edge killed while calling a peer may count a peer failure): not judged during the phase, but
  false at its end like every other.

And in the healthy baseline (``BASELINE``, before the first phase), both forms of every rule must be false.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TRUE = "true"
FALSE = "false"
MAY = "may"
RULE = "rule"
SHORT = "short"
BASELINE = "baseline"
SHORT_RANGE = "10s"  # ten scrapes at scrape_interval 1s: rate() has enough points, an outage drains fast

# Per phase, the alerts whose condition the phase must make true (TRUE) or may (MAY); every other alert of
# alerts.yml must stay false (FALSE). Why, from the rules and the metrics:
EXPECT: dict[str, dict[str, str]] = {
    # A webhookd of the previous release stopped (SIGTERM) and replaced: it releases its leases, so no
    # lease expires unclaimed; the migration holds a lock briefly, which a request may wait on, not fail.
    "release": {"DependencyFailures": MAY, "WebhookLeasesExpired": MAY},
    # Each process killed: a caller of a dead peer may count a peer failure, and the dead webhookd's
    # deliveries hold their lease until it runs out (WebhookLeasesExpired counts those past it).
    "kills": {
        "DependencyFailures": MAY,
        "EdgeServerErrors": MAY,
        "WebhookLeasesExpired": MAY,
        "OutboxStuck": MAY,
    },
    # The database refuses: database_up 0 in authsvc, webhookd and the edges (DatabaseDown); requests
    # answered 503 and counted in dependency_failures_total (DependencyFailures). The 503s are 5xx in
    # edge_http_responses_total and authsvc's outbox may fail to publish meanwhile.
    "database": {
        "DatabaseDown": TRUE,
        "DependencyFailures": TRUE,
        "EdgeServerErrors": MAY,
        "OutboxStuck": MAY,
        "WebhookLeasesExpired": MAY,
    },
    # Redis stopped: edge_ratelimit_redis_up 0 (RedisDown). The edges fall back to their own buckets, so
    # no request fails and dependency_failures_total does not count.
    "redis": {"RedisDown": TRUE},
    # webhookd#1 killed while the receiver is slow: its in-flight deliveries are re-sent after their lease;
    # between the lease running out and the claim a lease-expired gauge may read > 0.
    "slow": {"WebhookLeasesExpired": MAY, "DependencyFailures": MAY},
}

_RANGE = re.compile(r"\[(\d+[smhdwy])+\]")


def short_form(expr: str) -> str:
    """``expr`` with every range selector ``[5m]`` replaced by ``[SHORT_RANGE]`` (subqueries aside: the rules
    have none)."""
    return _RANGE.sub(f"[{SHORT_RANGE}]", expr)


def expectation(phase: str, alert: str) -> str:
    return EXPECT.get(phase, {}).get(alert, FALSE)


@dataclass(frozen=True)
class Sample:
    """One evaluation: in ``phase`` (or BASELINE), at its end (``at_end``: the clear window) or not, of
    ``alert``'s ``form`` (RULE or SHORT), true (a non-empty answer) or not."""

    phase: str
    alert: str
    form: str
    true: bool
    at_end: bool = False


@dataclass(frozen=True)
class Judged:
    phase: str
    alert: str
    expected: str  # TRUE, FALSE, MAY, or FALSE for the baseline
    seen_true: int  # samples in the phase (the judged form) that were true
    seen_false: int
    cleared: bool  # the short form false at the phase's last sample (the baseline: always True)
    ok: bool
    why: str  # "" when ok


def judge(phase: str, alert: str, samples: Iterable[Sample]) -> Judged:
    """The verdict of one (phase, alert) over its samples (see the module's docstring)."""
    mine = [s for s in samples if s.phase == phase and s.alert == alert]
    if phase == BASELINE:
        true = sum(1 for s in mine if s.true)
        false = len(mine) - true
        ok = true == 0 and false > 0
        why = "" if ok else ("true on a healthy stack" if true else "never evaluated")
        return Judged(phase, alert, FALSE, true, false, True, ok, why)
    expected = expectation(phase, alert)
    form = RULE if expected == TRUE else SHORT
    during = [s.true for s in mine if s.form == form and not s.at_end]
    true, false = sum(during), len(during) - sum(during)
    ends = [s.true for s in mine if s.form == SHORT and s.at_end]
    cleared = bool(ends) and not ends[-1]
    if not during and not ends:
        return Judged(phase, alert, expected, 0, 0, False, False, "never evaluated")
    why = ""
    if expected == TRUE and not true:
        why = "never true during the outage"
    elif expected == FALSE and true:
        why = "true in a phase that does not concern it"
    elif not cleared:
        why = "still true after the recovery" if ends else "not evaluated after the recovery"
    return Judged(phase, alert, expected, true, false, cleared, not why, why)


def judge_all(phases: Iterable[str], alerts: Iterable[str], samples: Iterable[Sample]) -> list[Judged]:
    """Every (phase, alert), the baseline first."""
    kept = list(samples)
    names = list(alerts)
    return [judge(p, a, kept) for p in (BASELINE, *phases) for a in names]


def unknown_alerts(alerts: Iterable[str]) -> list[str]:
    """Alerts ``EXPECT`` names that alerts.yml has not (a rule renamed or removed: the table must follow)."""
    have = set(alerts)
    return sorted({a for table in EXPECT.values() for a in table} - have)


def table(judged: Iterable[Judged]) -> list[str]:
    """The printed table: phase x alert, expected / samples seen true / seen false / false at the phase's
    end, and the verdict. An alert expected false and found false throughout is folded into one line per
    phase (``others``), so that the rows that say something stand out."""
    lines = [f"{'phase':<9} {'alert':<29} {'expected':<8} {'true':>5} {'false':>5} {'cleared':>7}  verdict"]
    quiet: dict[str, list[str]] = {}
    for j in judged:
        if j.ok and j.expected == FALSE and not j.seen_true:
            quiet.setdefault(j.phase, []).append(j.alert)
            continue
        mark = "ok" if j.ok else f"MISMATCH: {j.why}"
        cleared = "yes" if j.cleared else "no"
        counts = f"{j.seen_true:>5} {j.seen_false:>5} {cleared:>7}"
        lines.append(f"{j.phase:<9} {j.alert:<29} {j.expected:<8} {counts}  {mark}")
    for phase, alerts in quiet.items():
        lines.append(
            f"{phase:<9} others ({len(alerts)}): expected false, false throughout and at the end: ok"
        )
    return lines

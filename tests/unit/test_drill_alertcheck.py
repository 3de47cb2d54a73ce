"""The drill's judgement of the alerts (scripts/drillkit/alertcheck.py): which alerts' expressions each
phase must make true, may make true, or must leave false; a rule as written judged "true during", its short
form "false again at the end"; the healthy baseline false throughout; and the table follows alerts.yml."""

from __future__ import annotations

import pathlib
import sys

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / "scripts"))

from drillkit.alertcheck import (
    BASELINE,
    EXPECT,
    FALSE,
    MAY,
    RULE,
    SHORT,
    TRUE,
    Sample,
    expectation,
    judge,
    judge_all,
    short_form,
    table,
    unknown_alerts,
)

ALERTS = pathlib.Path(__file__).resolve().parent.parent.parent / "deploy" / "prometheus" / "alerts.yml"


def rules() -> dict[str, str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {r["alert"]: str(r["expr"]) for g in doc["groups"] for r in g["rules"]}


def run(phase: str, alert: str, during: list[bool], end: list[bool], form: str = "") -> list[Sample]:
    """Samples of one (phase, alert): ``during`` in the judged form (RULE for TRUE, else SHORT, unless
    ``form``), ``end`` of the short form in the clear window."""
    judged_form = form or (RULE if expectation(phase, alert) == TRUE else SHORT)
    return [Sample(phase, alert, judged_form, t) for t in during] + [
        Sample(phase, alert, SHORT, t, at_end=True) for t in end
    ]


@pytest.mark.parametrize(
    ("phase", "alert", "during", "end", "ok", "why"),
    [
        # The database refuses: database_up == 0 seen, then false again.
        ("database", "DatabaseDown", [False, True, True, False], [False], True, ""),
        ("database", "DatabaseDown", [False, False, False], [False], False, "never true during the outage"),
        ("database", "DatabaseDown", [True], [True, True], False, "still true after the recovery"),
        ("database", "DatabaseDown", [True], [True, False], True, ""),  # the last round at the end counts
        ("database", "DatabaseDown", [True], [], False, "not evaluated after the recovery"),
        ("database", "DependencyFailures", [True], [False], True, ""),
        ("redis", "RedisDown", [False, True], [False], True, ""),
        ("redis", "RedisDown", [False, False], [False], False, "never true during the outage"),
        # Not this phase's business: its condition must stay false.
        ("redis", "DatabaseDown", [False, False], [False], True, ""),
        ("redis", "DatabaseDown", [False, True], [False], False, "true in a phase that does not concern it"),
        ("database", "InternalErrors", [True], [False], False, "true in a phase that does not concern it"),
        ("database", "GrpcRefused", [False], [False], True, ""),
        # A side effect: not judged during, but false at the end like every other.
        ("database", "EdgeServerErrors", [True, True], [False], True, ""),
        ("database", "EdgeServerErrors", [False], [False], True, ""),
        ("database", "EdgeServerErrors", [True], [True], False, "still true after the recovery"),
        ("kills", "DependencyFailures", [True], [False], True, ""),
        ("database", "DatabaseDown", [], [], False, "never evaluated"),
    ],
)
def test_judge(phase: str, alert: str, during: list[bool], end: list[bool], ok: bool, why: str) -> None:
    j = judge(phase, alert, run(phase, alert, during, end))
    assert (j.ok, j.why) == (ok, why)
    assert j.expected == expectation(phase, alert)


def test_judged_form() -> None:
    """An expected-true alert is judged on the rule as written (a 5-minute rate is true for the outage);
    the short form true during the outage does not count for it, nor the rule's form for a FALSE one."""
    assert not judge("database", "DatabaseDown", run("database", "DatabaseDown", [True], [False], SHORT)).ok
    samples = run("redis", "DependencyFailures", [True], [False], RULE)  # an earlier phase's 5-minute rate
    assert judge("redis", "DependencyFailures", samples).ok


@pytest.mark.parametrize(
    ("trues", "ok", "why"),
    [
        ([False, False, False], True, ""),
        ([False, True], False, "true on a healthy stack"),
        ([], False, "never evaluated"),
    ],
)
def test_baseline(trues: list[bool], ok: bool, why: str) -> None:
    samples = [Sample(BASELINE, "RedisDown", form, t) for t in trues for form in (RULE, SHORT)]
    j = judge(BASELINE, "RedisDown", samples)
    assert (j.ok, j.why, j.expected) == (ok, why, FALSE)


@pytest.mark.parametrize(
    ("expr", "short"),
    [
        ("database_up == 0", "database_up == 0"),
        (
            "sum by (job) (rate(dependency_failures_total[5m])) > 0",
            "sum by (job) (rate(dependency_failures_total[10s])) > 0",
        ),
        (
            "sum(rate(a{s=~'5..'}[5m])) / sum(rate(a[5m])) > 0.01",
            "sum(rate(a{s=~'5..'}[10s])) / sum(rate(a[10s])) > 0.01",
        ),
        ("rate(x[1h30m]) > 0", "rate(x[10s]) > 0"),
        ("tls_certificate_expiry_seconds < 14 * 86400", "tls_certificate_expiry_seconds < 14 * 86400"),
    ],
)
def test_short_form(expr: str, short: str) -> None:
    assert short_form(expr) == short


def test_table_follows_alerts_yml() -> None:
    """Every alert the table names is a rule of alerts.yml, every expectation is one of the three, and
    each outage phase expects its own alert (a renamed rule fails here, not silently in a drill)."""
    have = rules()
    assert unknown_alerts(have) == []
    assert unknown_alerts([*have, "Other"]) == []
    assert unknown_alerts([a for a in have if a != "RedisDown"]) == ["RedisDown"]
    assert {v for t in EXPECT.values() for v in t.values()} <= {TRUE, MAY}
    assert expectation("database", "DatabaseDown") == TRUE
    assert expectation("database", "DependencyFailures") == TRUE
    assert expectation("redis", "RedisDown") == TRUE
    assert expectation("redis", "DependencyFailures") == FALSE  # the edges fall back: no request fails
    assert expectation("kills", "DependencyFailures") == MAY
    assert expectation("nonesuch", "RedisDown") == FALSE


def test_judge_all_and_table() -> None:
    """One verdict per (phase, alert), the baseline first; quiet rows folded, mismatches shown."""
    alerts = ["DatabaseDown", "RedisDown", "GrpcRefused"]
    samples = [Sample(BASELINE, a, f, False) for a in alerts for f in (RULE, SHORT)]
    samples += run("redis", "RedisDown", [True], [False])
    samples += run("redis", "DatabaseDown", [True], [False])
    samples += run("redis", "GrpcRefused", [False], [False])
    judged = judge_all(["redis"], alerts, samples)
    assert [(j.phase, j.alert) for j in judged] == [(p, a) for p in (BASELINE, "redis") for a in alerts]
    assert [j.ok for j in judged] == [True, True, True, False, True, True]
    lines = table(judged)
    assert any("RedisDown" in line and line.endswith("ok") for line in lines)
    assert any(
        "DatabaseDown" in line and "MISMATCH: true in a phase that does not concern it" in line
        for line in lines
    )
    assert lines[-2:] == [
        "baseline  others (3): expected false, false throughout and at the end: ok",
        "redis     others (1): expected false, false throughout and at the end: ok",
    ]

"""deploy/prometheus/alerts.yml: the rules docs/alerts.md describes, one for each row of its table and no
other, every metric a rule reads exported by some service's code, and `promtool check rules` clean
(when promtool is installed), and its unit tests (deploy/prometheus/alerts_test.yml: each rule firing and
not firing) passing `promtool test rules`."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DOC = ROOT / "docs" / "alerts.md"
PACKAGES = ("authsvc", "webhookd", "edge", "portal", "svckit")
# PromQL words that look like metric names.
PROMQL = {"sum", "by", "rate", "max", "min", "on", "humanizeDuration", "vector", "absent", "or", "and"}


def _rules() -> list[dict[str, object]]:
    data = yaml.safe_load(RULES.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def _documented() -> set[str]:
    """The alert names in the first column of docs/alerts.md's table."""
    return set(re.findall(r"^\| ([A-Z][A-Za-z]+) \|", DOC.read_text(), re.MULTILINE))


def _exported() -> str:
    return "\n".join(p.read_text() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_every_documented_alert_has_a_rule_and_no_rule_is_undocumented() -> None:
    names = [str(rule["alert"]) for rule in _rules() if "alert" in rule]
    assert len(names) == len(set(names))
    assert set(names) == _documented() - {"NotReady"}  # NotReady is an outside probe of /readyz
    assert "WebhookLeasesExpired" in names and "SealedRowsUnknownKey" in names


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: str(r.get("alert")))
def test_every_metric_a_rule_reads_is_exported(rule: dict[str, object]) -> None:
    expr = re.sub(r"\{[^}]*\}|\[[^]]*\]|\"[^\"]*\"", "", str(rule["expr"]))
    names = {n for n in re.findall(r"[a-z_][a-z0-9_]*", expr) if n not in PROMQL and "_" in n}
    assert names, expr
    code = _exported()
    for name in names:
        # A counter is declared without its _total suffix by some of our collectors.
        assert f'"{name}"' in code or f'"{name.removesuffix("_total")}' in code, name


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_finds_nothing_to_say() -> None:
    done = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_has_a_firing_and_a_quiet_case() -> None:
    data = yaml.safe_load(RULE_TESTS.read_text())
    assert data["rule_files"] == ["alerts.yml"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in data["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {str(rule["alert"]) for rule in _rules() if "alert" in rule}
    assert firing == names
    assert quiet == names


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_rule_tests_pass() -> None:
    done = subprocess.run(
        ["promtool", "test", "rules", RULE_TESTS.name], capture_output=True, text=True, cwd=RULE_TESTS.parent
    )
    assert done.returncode == 0, done.stdout + done.stderr

"""A real Prometheus for the drill (Debian's ``prometheus``, which scripts/_bootstrap.sh installs where it
can): it scrapes every process's /metrics each second and loads deploy/prometheus/alerts.yml; the
``Sampler`` evaluates each rule's expression (as written and in its short form, drillkit.alertcheck)
through the query API twice a second and keeps what it saw, for the windows the report judges."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import subprocess
import time
from dataclasses import dataclass, field

import httpx

from drillkit.alertcheck import RULE, SHORT, Judged, Sample, judge_all, short_form
from drillkit.phases import Window
from tests.support import ROOT

ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
SAMPLE_EVERY = 0.5  # seconds between two rounds of evaluation (the scrapes and the rules run every 1 s)


def binary() -> str | None:
    found = shutil.which("prometheus")
    if found:
        return found
    debian = pathlib.Path("/usr/bin/prometheus")
    return str(debian) if debian.exists() else None


def config(targets: dict[str, list[str]]) -> str:
    """The configuration (JSON, which Prometheus reads as the YAML it is): one job per service, named as
    the services' own metrics say (authsvc, webhookd, edge, portal)."""
    return json.dumps(
        {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": addrs}]} for job, addrs in targets.items()
            ],
        },
        indent=1,
    )


class Prometheus:
    def __init__(self, exe: str, work: pathlib.Path, port: int, targets: dict[str, list[str]]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.work = work
        (work / "prometheus.yml").write_text(config(targets))
        self.argv = [
            exe,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        with open(self.work / "prometheus.log", "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        tail = (self.work / "prometheus.log").read_text()[-2000:]
        raise RuntimeError(f"prometheus did not become ready: {tail}")

    def rules(self) -> dict[str, str]:
        """Every alerting rule Prometheus loaded from alerts.yml: name -> expression."""
        groups = httpx.get(f"{self.url}/api/v1/rules", timeout=5).json()["data"]["groups"]
        return {r["name"]: r["query"] for g in groups for r in g["rules"] if r["type"] == "alerting"}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@dataclass
class Seen:
    at: float  # monotonic
    alert: str
    form: str  # RULE or SHORT
    true: bool


@dataclass
class Sampler:
    """Evaluates both forms of every rule each ``SAMPLE_EVERY`` until stopped (twice per scrape, so that a
    value one scrape held is seen); ``latest`` is the last round."""

    url: str
    rules: dict[str, str]
    targets: int  # every /metrics address scraped
    seen: list[Seen] = field(default_factory=list)
    errors: int = 0
    latest: dict[tuple[str, str], bool] = field(default_factory=dict)
    rounds: int = 0
    up: list[tuple[float, frozenset[str]]] = field(default_factory=list)  # (monotonic, instances up) a round
    measured: asyncio.Event = field(default_factory=asyncio.Event)  # set as each round's ``up`` is kept

    def forms(self) -> list[tuple[str, str, str]]:
        out = []
        for name, expr in self.rules.items():
            out.append((name, RULE, expr))
            out.append((name, SHORT, short_form(expr)))
        return out

    async def _query(self, http: httpx.AsyncClient, expr: str) -> list[dict[str, object]] | None:
        try:
            resp = await http.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5)
            body = resp.json()
        except (httpx.HTTPError, ValueError):
            return None
        if body.get("status") != "success":
            return None
        return list(body["data"]["result"])

    async def _one(self, http: httpx.AsyncClient, expr: str) -> bool | None:
        result = await self._query(http, expr)
        return None if result is None else bool(result)  # a condition holds where the answer is not empty

    async def _up(self, http: httpx.AsyncClient, at: float) -> None:
        """Which targets the last scrape reached: a check of the rules false on a stack Prometheus cannot
        see would prove nothing."""
        result = await self._query(http, "up == 1")
        if result is not None:
            instances = (r.get("metric", {}) for r in result)
            self.up.append(
                (at, frozenset(str(m.get("instance", "")) for m in instances if isinstance(m, dict)))
            )
            self.measured.set()

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient() as http:
            while not stop.is_set():
                began = time.monotonic()
                forms = self.forms()
                answers = await asyncio.gather(*(self._one(http, expr) for _, _, expr in forms))
                await self._up(http, began)
                for (name, form, _), true in zip(forms, answers, strict=True):
                    if true is None:
                        self.errors += 1
                        continue
                    self.seen.append(Seen(began, name, form, true))
                    self.latest[(name, form)] = true
                self.rounds += 1
                try:
                    await asyncio.wait_for(stop.wait(), max(0.0, SAMPLE_EVERY - (time.monotonic() - began)))
                except TimeoutError:
                    pass

    def reached(self, since: float) -> int:
        """How many targets some round since ``since`` (monotonic) saw scraped."""
        return len(frozenset().union(*(seen for at, seen in self.up if at >= since)))

    async def wait_reached(self, since: float, limit: float) -> None:
        """Until every target was seen scraped since ``since``, at most ``limit`` seconds: Prometheus's
        first scrape of each target is part of the stack becoming watchable, not of its health."""
        deadline = time.monotonic() + limit
        while self.reached(since) < self.targets and time.monotonic() < deadline:
            self.measured.clear()
            try:
                await asyncio.wait_for(self.measured.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                pass

    def short_true(self) -> list[str]:
        """Alerts whose short form was true in the last round."""
        return sorted(n for (n, form), true in self.latest.items() if form == SHORT and true)


def judge_seen(
    windows: list[Window], seen: list[Seen], phases: list[str], rules: dict[str, str]
) -> list[Judged]:
    """Each evaluation assigned to the window it was made in (the baseline, a phase's windows, a phase's
    clear window; the drain is not judged), then the verdict of every (phase, alert)."""
    samples = []
    for s in seen:
        w = next((w for w in windows if w.start <= s.at < (w.end or float("inf"))), None)
        if w is not None and w.phase:
            samples.append(Sample(w.phase, s.alert, s.form, s.true, at_end=w.clear))
    return judge_all(phases, rules, samples)

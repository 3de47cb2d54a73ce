"""scripts/drill.py as an operator runs it, on its quickest phase: a database of its own on this machine's
PostgreSQL, a redis-server of its own stopped and started under partner traffic through both edges (the
second with --workers 2) and the portal. It exits 0 (nothing lost, no 500, no internals shown) and prints
each part of its report. The whole drill, every phase, is run by hand (docs/operations.md "The drill")."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import pg_skip_reason
from tests.support import ROOT

DRILL = [sys.executable, str(ROOT / "scripts" / "drill.py")]


def test_an_unknown_phase_is_a_usage_error() -> None:
    done = subprocess.run([*DRILL, "--phases", "redis,floods"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--phases: floods: choose among release, kills, database, redis, slow" in done.stderr


@pytest.mark.postgres
def test_the_redis_phase_runs_end_to_end_and_reports_every_part() -> None:
    if reason := pg_skip_reason():
        pytest.skip(reason)
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: the drill's redis phase needs a Redis of its own")
    # Redis down 4 s: the edges report it down after 1 s of failures (edge.sharedlimit.reported_up), so
    # about three scrapes of the drill's Prometheus, where it runs, see edge_ratelimit_redis_up 0 (with 2 s,
    # a loaded machine left one scrape or none).
    quick = ["--warmup", "1", "--down", "4", "--settle", "2", "--lease-seconds", "10", "--drain", "3"]
    done = subprocess.run(
        [*DRILL, "--phases", "redis", "--rate", "4", "--slow-post", "0", *quick],
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert re.search(r"^database drill_\w+; Redis redis://127\.0\.0\.1:\d+/0 \(the drill's own\)", out, re.M)
    assert "7 processes READY" in out and "edge#2 with --workers 2" in out
    for window in ("before the phases", "redis down", "redis back", "drain"):
        assert re.search(rf"^{window}\s+\s\d+", out, re.M), window
    accepted = re.search(r"^sample events: (\d+) accepted \(202\), (\d+) received, lost 0;", out, re.M)
    assert accepted and int(accepted.group(1)) > 0 and accepted.group(1) == accepted.group(2)
    assert re.search(r"^revocations: (\d+) made, \1 webhooks received, lost 0;", out, re.M)
    assert re.search(
        r"^revocation lag \(from the revocation to the last answer that still took the key\): "
        r"median [\d.]+ s",
        out,
        re.M,
    )
    assert re.search(r"^duplicated events: \d+ \(\d+ extra deliveries\): \d+ after a lease", out, re.M)
    assert "answers of status 500: 0; bodies showing internals: 0" in out
    assert re.search(r"^partner errors by status \(after the retry\): ", out, re.M)
    assert re.search(r"^readiness flips: \d+$", out, re.M)
    if shutil.which("prometheus") or pathlib.Path("/usr/bin/prometheus").exists():
        # The alerts' expressions through a real Prometheus: RedisDown's true during the outage and false
        # after it, every other false, with every process's /metrics scraped (scripts/drillkit/alertcheck.py).
        assert re.search(r"^  redis +RedisDown +true +[1-9]\d* +\d+ +yes  ok$", out, re.M), out[-3000:]
        assert re.search(r"^  baseline +others \(\d+\): expected false, false throughout", out, re.M)
        assert re.search(r"^  targets scraped in the baseline: (\d+) of \1 \(", out, re.M)
    else:
        assert "prometheus is not installed: the alerts' expressions are not checked" in out
    assert re.search(r"^RESULT: passed$", out, re.M)

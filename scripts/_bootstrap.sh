# Sourced by scripts/run, scripts/test and the benchmarks: makes .venv, installs the project,
# generates the gRPC stubs and the npm tools. Idempotent and quiet when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv" >&2
    "$PY" -m venv .venv
fi
VPY="$ROOT/.venv/bin/python"
export PATH="$ROOT/.venv/bin:$PATH"
stamp=".venv/.installed-$(cat pyproject.toml requirements-dev.lock | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "bootstrap: installing packages (first run takes a minute)" >&2
    "$VPY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1
    # Exactly the locked versions, each checked against its hash (scripts/lock writes the lock from
    # pyproject.toml); then the project itself, which brings nothing more.
    # (this machine's pip config names extra local indexes that may be absent: drop those warnings)
    "$VPY" -m pip install -q --disable-pip-version-check --require-hashes -r requirements-dev.lock \
        2> >(grep -v "is ignored: it is neither" >&2)
    "$VPY" -m pip install -q --disable-pip-version-check --no-deps -e . 2> >(grep -v "is ignored: it is neither" >&2)
    # The generated stubs (./travel) and the tests import from the project root.
    echo "$ROOT" > "$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/travel_project_root.pth"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
gen_stamp="travel/.generated-$(cat proto/travel/*/*/*.proto scripts/gen_protos.py | sha256sum | cut -c1-16)"
if [ ! -f "$gen_stamp" ]; then
    "$VPY" scripts/gen_protos.py
    touch "$gen_stamp"
fi
# The npm tools (buf, htmx, the OpenAPI client tools, a Node gRPC client): again whenever the lock changes.
npm_stamp="node_modules/.installed-$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -f "$npm_stamp" ]; then
    echo "bootstrap: installing buf, htmx, the OpenAPI client tools and grpc-js (npm)" >&2
    npm install --no-audit --no-fund --silent
    rm -f node_modules/.installed-*
    touch "$npm_stamp"
fi
# The portal's browser tests drive the system Chromium; never a browser downloaded by Playwright.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing Debian's chromium (apt-get)" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >/dev/null 2>&1 \
        || echo "bootstrap: chromium could not be installed; the portal browser tests will be skipped" >&2
fi
# The alert rules' unit tests (tests/unit/test_alert_rules.py) run promtool; Debian's prometheus package has it.
if ! command -v promtool >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing Debian's prometheus for promtool (apt-get)" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; } >/dev/null 2>&1 \
        || echo "bootstrap: promtool could not be installed; the alert rule tests will be skipped" >&2
fi

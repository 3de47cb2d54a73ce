"""deploy/: a systemd unit per service whose ExecStart is that service's ``serve`` with flags it has and a
config file (deploy/config/<service>.toml) every key of which names one of its flags; systemd's own
checker finds nothing to say about the units (when it is installed); the Containerfile builds in stages
and runs as a user that is not root."""

from __future__ import annotations

import configparser
import importlib
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from svckit.flags import FlagParser

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"
SERVICES = ("authsvc", "webhookd", "edge", "portal")
MIGRATING = ("authsvc", "webhookd", "edge")  # the services with tables: a oneshot migrate unit each
INSTALLED_PYTHON = "/opt/travel/venv/bin/python"
ETC = "/etc/travel/"


def serve_parser(service: str) -> FlagParser:
    if service == "authsvc":  # builds its parser in main(): the same flags on one of ours
        from authsvc._server import add_arguments

        p = FlagParser(prog="authsvc")
        add_arguments(p.add_subparsers(dest="command").add_parser("serve"))
        return p
    module = importlib.import_module(f"{service}._server" if service == "webhookd" else f"{service}.__main__")
    parser: FlagParser = module.build_parser()
    return parser


def unit(service: str) -> configparser.RawConfigParser:
    cp = configparser.RawConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(DEPLOY / "systemd" / f"{service}.service")
    return cp


def test_every_service_has_a_unit_and_a_config_file() -> None:
    units = sorted(p.stem for p in (DEPLOY / "systemd").glob("*.service"))
    assert units == sorted([*SERVICES, *(f"{s}-migrate" for s in MIGRATING)])
    assert sorted(p.stem for p in (DEPLOY / "config").glob("*.toml")) == sorted(SERVICES)


@pytest.mark.parametrize("service", SERVICES)
def test_execstart_is_the_services_serve_with_flags_it_has(
    service: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = unit(service)["Service"]
    assert s["User"] not in ("", "root") and s["UMask"] == "0077"
    argv = shlex.split(s["ExecStart"])
    assert argv[:4] == [INSTALLED_PYTHON, "-m", service, "serve"]
    # The credentials the config names exist only under systemd: stand-ins in their place.
    password = tmp_path / "db-password"
    password.write_text("x\n")
    monkeypatch.setenv(f"{service.upper()}_DATABASE_PASSWORD_FILE", str(password))
    args = [a.replace(ETC, f"{DEPLOY / 'config'}/") for a in argv[3:]]
    ns = serve_parser(service).parse_args(args)  # an unknown flag or config key: SystemExit
    assert ns.config == str(DEPLOY / "config" / f"{service}.toml")
    assert ns.log_level == "INFO"  # the file was read
    credentials = f"/run/credentials/{service}.service/"
    loaded = {line.split(":", 1)[0] for line in _all(service, "LoadCredential")}
    named = set(re.findall(re.escape(credentials) + r"([\w.-]+)", pathlib.Path(ns.config).read_text()))
    assert named <= loaded, f"the config names credentials the unit does not load: {named - loaded}"


def _all(service: str, key: str) -> list[str]:
    text = (DEPLOY / "systemd" / f"{service}.service").read_text()
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


@pytest.mark.parametrize("service", MIGRATING)
def test_the_migrate_unit_runs_before_its_service(service: str) -> None:
    m = unit(f"{service}-migrate")
    assert m["Unit"]["Before"] == f"{service}.service"
    assert m["Service"]["Type"] == "oneshot" and m["Service"]["User"] == unit(service)["Service"]["User"]
    assert m["Install"]["RequiredBy"] == f"{service}.service"
    s = unit(service)["Unit"]
    assert s["Requires"] == f"{service}-migrate.service" and f"{service}-migrate.service" in s["After"]
    argv = shlex.split(m["Service"]["ExecStart"])
    assert argv == [INSTALLED_PYTHON, "-m", service, "migrate", "--config", f"{ETC}{service}.toml"]


@pytest.mark.postgres
@pytest.mark.parametrize("service", MIGRATING)
def test_the_migrate_units_command_migrates_with_the_services_config(
    service: str, tmp_path: pathlib.Path, pg_url: str
) -> None:
    """Its ExecStart as systemd runs it: the service's config file (serve's keys in it left alone), the
    password file named by the unit's Environment= (``%d``: its credentials directory), the database URL
    from the optional environment file (here: this test's schema)."""
    m = unit(f"{service}-migrate")["Service"]
    (tmp_path / "db-password").write_text("unused-by-trust-auth\n")
    env = {**os.environ, f"{service.upper()}_DATABASE": pg_url}
    for line in _all(f"{service}-migrate", "Environment"):
        name, value = line.split("=", 1)
        env[name] = value.replace("%d", str(tmp_path))
    argv = [a.replace(ETC, f"{DEPLOY / 'config'}/") for a in shlex.split(m["ExecStart"])]
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"{service} schema at revision ")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_finds_nothing_to_say(tmp_path: pathlib.Path) -> None:
    for service in [*SERVICES, *(f"{s}-migrate" for s in MIGRATING)]:
        text = (DEPLOY / "systemd" / f"{service}.service").read_text()
        # The installed interpreter is this one here; verify checks that ExecStart is executable.
        (tmp_path / f"{service}.service").write_text(text.replace(INSTALLED_PYTHON, sys.executable))
    done = subprocess.run(
        ["systemd-analyze", "verify", *sorted(str(p) for p in tmp_path.glob("*.service"))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Unknown keys are only warned about (exit 0): any output is a finding.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_containerfile_builds_in_stages_and_runs_unprivileged() -> None:
    lines = [
        line.strip()
        for line in (DEPLOY / "Containerfile").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    stages = [line for line in lines if line.startswith("FROM ")]
    assert len(stages) >= 2 and all(" AS " in s for s in stages)
    final = lines[lines.index(stages[-1]) :]
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any(line.startswith("COPY --from=") for line in final)
    assert not any("pip install" in line for line in final)  # nothing built in the image that runs
    assert 'ENTRYPOINT ["python", "-m"]' in final
    cmd = next(line for line in final if line.startswith("CMD "))
    assert cmd == 'CMD ["authsvc", "serve"]'
    copied = {m.group(1) for line in final if (m := re.match(r"COPY --from=\S+ /src/(\w+) ", line))}
    assert {*SERVICES, "svckit", "svcctl", "travel", "docs"} <= copied

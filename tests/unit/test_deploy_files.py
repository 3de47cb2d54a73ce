"""deploy/: a systemd unit per service whose ExecStart is that service's ``serve`` with flags it has and a
config file (deploy/config/<service>.toml) every key of which names one of its flags; systemd's own
checker finds nothing to say about the units (when it is installed); the Containerfile builds in stages
and runs as a user that is not root."""

from __future__ import annotations

import configparser
import importlib
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
    assert sorted(p.stem for p in (DEPLOY / "systemd").glob("*.service")) == sorted(SERVICES)
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


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_finds_nothing_to_say(tmp_path: pathlib.Path) -> None:
    for service in SERVICES:
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

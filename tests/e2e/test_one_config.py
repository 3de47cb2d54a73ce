"""One config file for every command of a service: ``python -m <service> <command> --config FILE`` with
the file ``serve`` reads (the shape of deploy/config/<service>.toml) takes from it what the command needs
(migrate and reseal: the database and its password file, reseal the keys) and ignores the keys of other
commands (``listen``, ``tls-cert``...). A key no command of the service knows is still refused. The
runbooks' commands needed the database settings twice before: "'listen' names no flag"."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys
import tomllib
from collections.abc import Callable

import pytest

from svckit.secretbox import new_key
from tests.support import ROOT

SERVICES = ("authsvc", "webhookd", "edge", "portal")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def toml_value(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def config_of(service: str, tmp: pathlib.Path, database: str, **extra: object) -> pathlib.Path:
    """deploy/config/<service>.toml with its database and files in ``tmp`` (every other key as shipped)."""
    settings = tomllib.loads((ROOT / "deploy" / "config" / f"{service}.toml").read_text())
    password = tmp / "db-password"
    password.write_text("unused-by-a-trusting-server\n")
    key = new_key()  # each of the three key files holds 32 random bytes so
    for name in ("secrets-key-file", "idempotency-key-file", "csrf-key-file"):
        if name in settings:
            path = tmp / f"{service}-{name}"
            path.write_text(key + "\n")
            settings[name] = str(path)
    if "database" in settings:
        settings["database"] = database
        settings["database-password-file"] = str(password)
    settings.update(extra)
    path = tmp / f"{service}.toml"
    path.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in settings.items()))
    return path


@pytest.mark.parametrize("service", ["authsvc", "webhookd", "edge"])
def test_migrate_and_reseal_read_the_services_config(
    service: str, pg_url: str, tmp_path: pathlib.Path
) -> None:
    config = config_of(service, tmp_path, pg_url)
    assert "listen" in config.read_text()  # the file serve reads, not one for migrate
    done = run(service, "migrate", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert f"{service} schema at revision" in done.stdout
    if service != "edge":
        done = run(service, "reseal", "--config", str(config))
        assert done.returncode == 0, done.stderr
        assert f"{service} reseal" in done.stdout


def main_of(service: str) -> Callable[[list[str]], int]:
    """The service's ``main`` (what ``python -m <service>`` runs), called in this process."""
    module = importlib.import_module(
        {"authsvc": "authsvc._server", "webhookd": "webhookd._server"}.get(service, f"{service}.__main__")
    )
    main: Callable[[list[str]], int] = module.main
    return main


@pytest.mark.parametrize(
    ("service", "command"),
    [("webhookd", "new-secrets-key"), ("edge", "new-idempotency-key"), ("portal", "new-csrf-key")],
)
def test_every_command_takes_the_config(
    service: str, command: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_of(service, tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    assert main_of(service)([command, "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("service", SERVICES)
def test_a_key_no_command_knows_is_still_refused(
    service: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_of(service, tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", databse="typo")
    command = "migrate" if service != "portal" else "new-csrf-key"
    with pytest.raises(SystemExit) as exited:
        main_of(service)([command, "--config", str(config)])
    assert exited.value.code == 2
    assert "'databse' names no flag" in capsys.readouterr().err


def test_migrate_on_a_database_that_is_not_there_says_so_in_one_line(
    pg_url: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = pg_url.split("?")[0].rsplit("/", 1)[0] + "/outage_no_such_database"
    config = config_of("webhookd", tmp_path, missing)
    assert main_of("webhookd")(["migrate", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("webhookd: the database cannot be reached: ") and "does not exist" in err
    assert len(err.splitlines()) == 1

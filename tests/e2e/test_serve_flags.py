"""authsvc's and webhookd's ``serve`` as real commands: ``--help`` works whatever the environment holds,
and a bad value, from a flag or from its environment variable, is a one-line usage error naming both
(exit 2, no traceback) before anything is started."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(module: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("AUTHSVC_", "WEBHOOKD_", "DATABASE_URL"))
    }
    return subprocess.run(
        [sys.executable, "-m", module, "serve", *argv],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,  # a command that parsed its flags would serve: never wait for that
    )


@pytest.mark.parametrize(
    ("module", "env", "flag"),
    [
        ("webhookd", {"WEBHOOKD_BATCH_SIZE": "abc", "WEBHOOKD_INSECURE_DEV": "maybe"}, "--batch-size"),
        (
            "authsvc",
            {"AUTHSVC_LAST_USED_FLUSH": "soon", "AUTHSVC_SHUTDOWN_GRACE": "later"},
            "--last-used-flush",
        ),
    ],
)
def test_help_never_fails(module: str, env: dict[str, str], flag: str) -> None:
    done = run(module, ["--help"], env)
    assert done.returncode == 0, done.stderr
    assert flag in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("module", "env", "argv", "says"),
    [
        (
            "webhookd",
            {"WEBHOOKD_BATCH_SIZE": "abc"},
            [],
            "argument --batch-size: invalid value 'abc' from WEBHOOKD_BATCH_SIZE (expected int)",
        ),
        (
            "authsvc",
            {"AUTHSVC_LAST_USED_FLUSH": "soon"},
            [],
            "argument --last-used-flush: invalid value 'soon' from AUTHSVC_LAST_USED_FLUSH (expected float)",
        ),
        (
            "authsvc",
            {},
            ["--shutdown-grace", "later"],
            "argument --shutdown-grace: invalid value 'later' (expected float)",
        ),
    ],
)
def test_bad_values_are_usage_errors(
    tmp_path: pathlib.Path, module: str, env: dict[str, str], argv: list[str], says: str
) -> None:
    base = ["--insecure-dev", "--listen", "127.0.0.1:0", "--metrics-listen", ""]
    base += ["--database", f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"]
    done = run(module, [*base, *argv], env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"python -m {module} serve: error: {says}")
    assert done.stdout == ""
    assert not (tmp_path / "db.sqlite").exists()


def test_insecure_dev_word_that_is_neither_on_nor_off_is_refused() -> None:
    """Plaintext is never switched on, nor silently left off, by a typo in the environment."""
    done = run("authsvc", [], {"AUTHSVC_INSECURE_DEV": "ture"})
    assert done.returncode == 2, done.stderr
    assert "argument --insecure-dev: invalid value 'ture' from AUTHSVC_INSECURE_DEV" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_flag_beats_a_bad_variable_and_defaults_come_from_the_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from svckit import addresses
    from webhookd._delivery import WorkerConfig
    from webhookd._server import Config, build_parser, config_from_args

    for name in [k for k in os.environ if k.startswith("WEBHOOKD_") or k == "DATABASE_URL"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("WEBHOOKD_BATCH_SIZE", "abc")
    config = config_from_args(build_parser().parse_args(["serve", "--insecure-dev", "--batch-size", "7"]))
    assert config.worker == WorkerConfig(batch_size=7)
    assert (config.listen, config.database, config.ca_bundle) == (addresses.WEBHOOKD, Config.database, None)
    assert config.delivery_timeout == Config.delivery_timeout


@pytest.mark.parametrize(
    ("module", "env", "argv", "says"),
    [
        (
            "webhookd",
            {"WEBHOOKD_SHUTDOWN_GRACE": "later"},
            [],
            "--shutdown-grace: invalid value 'later' from",
        ),
        ("webhookd", {"WEBHOOKD_DELIVERY_TIMEOUT": "0"}, [], "--delivery-timeout: invalid value '0' from"),
        ("webhookd", {}, ["--smtp", "mail"], "--smtp: invalid value 'mail' (expected HOST:PORT)"),
        ("webhookd", {"WEBHOOKD_ALLOW_HTTP": "si"}, [], "--allow-http: invalid value 'si' from"),
        (
            "authsvc",
            {"AUTHSVC_OUTBOX_BACKOFF_CAP": "1m"},
            [],
            "--outbox-backoff-cap: invalid value '1m' from",
        ),
        ("authsvc", {}, ["--last-used-flush", "soon"], "--last-used-flush: invalid value 'soon' (expected"),
    ],
)
def test_every_flag_is_checked_when_parsed(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    module: str,
    env: dict[str, str],
    argv: list[str],
    says: str,
) -> None:
    """The same parsers in this process (quicker than a command per flag)."""
    from authsvc._server import main as authsvc_main
    from webhookd._server import main as webhookd_main

    for name in [k for k in os.environ if k.startswith(("AUTHSVC_", "WEBHOOKD_"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_:
        {"authsvc": authsvc_main, "webhookd": webhookd_main}[module](["serve", "--insecure-dev", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"python -m {module} serve: error: argument {says}" in err
    for variable in env:
        assert variable in err

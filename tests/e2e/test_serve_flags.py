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


# The edge's serve and the two CLIs (svcctl, svc) take their flags the same way.
CLI_PREFIXES = ("EDGE_", "SVCCTL_", "SVC_", "DATABASE_URL")


def run_command(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(CLI_PREFIXES)}
    return subprocess.run(
        [sys.executable, *argv],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,  # a command that parsed its flags would serve or call a peer: never wait for that
    )


EDGE_SERVE = ["-m", "edge", "serve"]
EDGE_QUIET = ["--insecure-dev", "--live-listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0"]
EDGE_QUIET += ["--metrics-listen", ""]


@pytest.mark.parametrize(
    ("argv", "env", "flag"),
    [
        (EDGE_SERVE, {"EDGE_MAX_BODY_BYTES": "abc", "EDGE_INSECURE_DEV": "maybe"}, "--max-body-bytes"),
        (EDGE_SERVE, {"EDGE_HEADER_TIMEOUT": "soon", "EDGE_SHUTDOWN_GRACE": "later"}, "--header-timeout"),
        (["-m", "svcctl"], {"SVCCTL_INSECURE_DEV": "maybe"}, "--authsvc"),
        (["-m", "svccli"], {"SVC_BASE_URL": "sandbox"}, "--base-url"),
    ],
)
def test_help_never_fails_for_the_edge_and_the_clis(argv: list[str], env: dict[str, str], flag: str) -> None:
    done = run_command([*argv, "--help"], env)
    assert done.returncode == 0, done.stderr
    assert flag in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("argv", "env", "prog", "says"),
    [
        (
            [*EDGE_SERVE, *EDGE_QUIET],
            {"EDGE_MAX_BODY_BYTES": "abc"},
            "python -m edge serve",
            "argument --max-body-bytes: invalid value 'abc' from EDGE_MAX_BODY_BYTES (expected int)",
        ),
        (
            [*EDGE_SERVE, *EDGE_QUIET],
            {"EDGE_RATE_LIMIT_LIVE": "fast"},
            "python -m edge serve",
            "argument --rate-limit-live: invalid value 'fast' from EDGE_RATE_LIMIT_LIVE (expected float)",
        ),
        (
            [*EDGE_SERVE, *EDGE_QUIET, "--denial-cache-size", "many"],
            {},
            "python -m edge serve",
            "argument --denial-cache-size: invalid value 'many' (expected int)",
        ),
        (
            [*EDGE_SERVE, "--live-listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0"],
            {"EDGE_INSECURE_DEV": "ture"},
            "python -m edge serve",
            "argument --insecure-dev: invalid value 'ture' from EDGE_INSECURE_DEV",
        ),
        (
            ["-m", "svcctl", "accounts", "get", "acct_x"],
            {"SVCCTL_INSECURE_DEV": "maybe", "SVCCTL_AUTHSVC": "127.0.0.1:1"},
            "svcctl",
            "argument --insecure-dev: invalid value 'maybe' from SVCCTL_INSECURE_DEV",
        ),
        (
            ["-m", "svccli", "trigger", "booking.cancelled"],
            {"SVC_BASE_URL": "127.0.0.1:8081", "SVC_API_KEY": "svc_test_x"},
            "svc",
            "argument --base-url: invalid value '127.0.0.1:8081' from SVC_BASE_URL "
            "(expected an http:// or https:// URL)",
        ),
        (
            ["-m", "svccli", "--base-url", "ftp://sandbox", "trigger", "booking.cancelled"],
            {"SVC_API_KEY": "svc_test_x"},
            "svc",
            "argument --base-url: invalid value 'ftp://sandbox' (expected an http:// or https:// URL)",
        ),
    ],
)
def test_bad_values_are_usage_errors_for_the_edge_and_the_clis(
    argv: list[str], env: dict[str, str], prog: str, says: str
) -> None:
    done = run_command(argv, env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"{prog}: error: {says}")
    assert done.stdout == ""


def test_edge_defaults_come_from_the_config_and_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    """No flag and no variable: every setting is EdgeConfig's default (the addresses svckit.addresses');
    a flag beats a bad variable."""
    from edge.__main__ import build_parser, config_from
    from edge.config import DEFAULT_LIVE_LISTEN, DEFAULT_SANDBOX_LISTEN, EdgeConfig
    from svckit import addresses

    for name in [k for k in os.environ if k.startswith(("EDGE_", "DATABASE_URL"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("EDGE_MAX_BODY_BYTES", "abc")
    args = build_parser().parse_args(["serve", "--insecure-dev", "--max-body-bytes", "2048"])
    config, default = config_from(args), EdgeConfig()
    assert config.max_body_bytes == 2048
    assert (config.authsvc, config.webhookd) == (addresses.AUTHSVC, addresses.WEBHOOKD)
    assert (args.live_listen, args.sandbox_listen) == (addresses.EDGE_LIVE, addresses.EDGE_SANDBOX)
    assert (DEFAULT_LIVE_LISTEN, DEFAULT_SANDBOX_LISTEN) == (addresses.EDGE_LIVE, addresses.EDGE_SANDBOX)
    assert args.metrics_listen == addresses.EDGE_METRICS
    assert (list(config.live_hosts), list(config.sandbox_hosts)) == (
        list(default.live_hosts),
        list(default.sandbox_hosts),
    )
    for name in (
        "database",
        "docs_base",
        "rate_limit_live",
        "rate_limit_sandbox",
        "redis",
        "redis_prefix",
        "redis_timeout",
        "denial_cache_size",
        "stream_ping_seconds",
        "keep_alive_timeout",
        "header_timeout",
        "body_timeout",
        "upstream_timeout",
        "sandbox_confirm_seconds",
        "trusted_proxies",
    ):
        assert getattr(config, name) == getattr(default, name), name


def test_cli_defaults_come_from_the_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    from svccli.__main__ import build_parser as svc_parser
    from svcctl.__main__ import build_parser as svcctl_parser
    from svckit import addresses

    for name in [k for k in os.environ if k.startswith(("SVCCTL_", "SVC_"))]:
        monkeypatch.delenv(name)
    ops = svcctl_parser().parse_args(["--insecure-dev", "accounts", "get", "acct_x"])
    assert (ops.authsvc, ops.webhookd) == (addresses.AUTHSVC, addresses.WEBHOOKD)
    assert ops.actor.startswith("ops:")
    monkeypatch.setenv("SVCCTL_ACTOR", "ops:alice")
    monkeypatch.setenv("SVCCTL_WEBHOOKD", "10.0.0.2:50052")
    ops = svcctl_parser().parse_args(["--insecure-dev", "accounts", "get", "acct_x"])
    assert (ops.actor, ops.webhookd) == ("ops:alice", "10.0.0.2:50052")
    partner = svc_parser().parse_args(["trigger", "booking.cancelled"])
    assert (partner.base_url, partner.api_key) == (addresses.SANDBOX_URL, "")
    monkeypatch.setenv("SVC_API_KEY", "svc_test_x")
    monkeypatch.setenv("SVC_BASE_URL", "https://sandbox.example")
    partner = svc_parser().parse_args(["trigger", "booking.cancelled"])
    assert (partner.base_url, partner.api_key) == ("https://sandbox.example", "svc_test_x")

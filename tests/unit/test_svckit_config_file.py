"""svckit.flags ``--config FILE`` / ``<SERVICE>_CONFIG``: a TOML file of flag values. The flag beats the
environment, the environment beats the file, the file beats the default; a bad file, an unknown key or a
bad value is a one-line usage error naming the file (exit 2)."""

from __future__ import annotations

import pathlib

import pytest

from svckit.flags import FlagParser, add_flag


def parser() -> FlagParser:
    p = FlagParser(prog="svc")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    add_flag(s, "--batch-size", env="T_BATCH_SIZE", type=int, default=200, help="per claim")
    add_flag(s, "--listen", env="T_LISTEN", default="127.0.0.1:1", help="where")
    add_flag(s, "--insecure-dev", env="T_INSECURE_DEV", switch=True, help="plaintext")
    add_flag(s, "--alert-email", env="T_ALERT_EMAIL", repeat=True, help="who")
    return p


CONFIG = 'batch-size = 7\nlisten = "0.0.0.0:9"\ninsecure_dev = true\nalert-email = ["a@x", "b@x"]\n'


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        (
            {},
            [],
            {"batch_size": 7, "listen": "0.0.0.0:9", "insecure_dev": True, "alert_email": ["a@x", "b@x"]},
        ),
        ({"T_BATCH_SIZE": "8"}, [], {"batch_size": 8, "listen": "0.0.0.0:9"}),
        ({"T_BATCH_SIZE": "8"}, ["--batch-size", "9"], {"batch_size": 9}),
        ({}, ["--batch-size", "200"], {"batch_size": 200}),  # the flag wins even when it says the default
        ({"T_ALERT_EMAIL": "c@x"}, [], {"alert_email": ["c@x"]}),
        ({}, ["--alert-email", "d@x"], {"alert_email": ["d@x"]}),
        ({"T_INSECURE_DEV": "off"}, [], {"insecure_dev": False}),
    ],
)
@pytest.mark.parametrize("given_by", ["flag", "env"])
def test_precedence_is_flag_then_environment_then_file_then_default(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    argv: list[str],
    expected: dict[str, object],
    given_by: str,
) -> None:
    config = tmp_path / "svc.toml"
    config.write_text(CONFIG)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if given_by == "env":
        monkeypatch.setenv("T_CONFIG", str(config))
        args = ["serve", *argv]
    else:
        args = ["serve", "--config", str(config), *argv]
    ns = parser().parse_args(args)
    assert {k: getattr(ns, k) for k in expected} == expected


def test_without_a_file_the_defaults_hold_and_a_parser_parses_again_unchanged(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "svc.toml"
    config.write_text(CONFIG)
    p = parser()
    assert p.parse_args(["serve", "--config", str(config)]).batch_size == 7
    ns = p.parse_args(["serve"])
    assert (ns.batch_size, ns.listen, ns.insecure_dev, ns.alert_email) == (200, "127.0.0.1:1", False, [])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("batch-size = 'abc'\n", ["--batch-size", "invalid value 'abc'", "svc.toml (batch-size)"]),
        ("batch-sise = 3\n", ["--config", "'batch-sise' names no flag"]),
        ("listen = [[1]]\n", ["--config", "listen: expected a string"]),
        ("listen = \n", ["--config", "is not TOML"]),
        ("insecure-dev = 'maybe'\n", ["--insecure-dev", "invalid value 'maybe'"]),
    ],
)
def test_a_bad_file_is_a_usage_error_naming_it(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], text: str, words: list[str]
) -> None:
    config = tmp_path / "svc.toml"
    config.write_text(text)
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["serve", "--config", str(config)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for word in words:
        assert word in err


def test_a_missing_file_is_a_usage_error(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", f"--config={tmp_path / 'nope.toml'}"])
    assert "No such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "module", ["authsvc._server", "webhookd._server", "edge.__main__", "portal.__main__"]
)
def test_every_serve_command_takes_a_config_file(
    module: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    service = module.split(".")[0]
    config = tmp_path / f"{service}.toml"
    config.write_text('log-level = "DEBUG"\n')
    monkeypatch.setenv(f"{service.upper()}_CONFIG", str(config))
    mod = importlib.import_module(module)
    if hasattr(mod, "build_parser"):
        p = mod.build_parser()
    else:  # authsvc builds its parser in main(): the same flags on a parser of ours
        p = FlagParser(prog="authsvc")
        mod.add_arguments(p.add_subparsers(dest="command").add_parser("serve"))
    ns = p.parse_args(["serve"])
    assert ns.log_level == "DEBUG"

"""svckit.flags: the flag beats the environment, the environment beats the default; a bad value from
either is a one-line usage error naming the flag (and the variable), exit 2; --help never converts."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from svckit.flags import FlagParser, add_flag, boolean, config_default, csv_list


@dataclasses.dataclass
class Config:
    batch_size: int = 200
    timeout: float = 2.5
    hosts: list[str] = dataclasses.field(default_factory=lambda: ["a"])


def parser() -> FlagParser:
    p = FlagParser(prog="svc")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    add_flag(
        s,
        "--batch-size",
        env="T_BATCH_SIZE",
        type=int,
        default=config_default(Config, "batch_size"),
        help="per claim",
    )
    add_flag(s, "--timeout", env="T_TIMEOUT", type=float, default=config_default(Config, "timeout"), help="s")
    add_flag(s, "--insecure-dev", env="T_INSECURE_DEV", switch=True, help="plaintext")
    add_flag(s, "--alert-email", env="T_ALERT_EMAIL", repeat=True, help="who")
    add_flag(s, "--database", env="T_DATABASE", also_env=("T_URL",), default="sqlite://", help="url")
    return p


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        (
            {},
            [],
            {
                "batch_size": 200,
                "timeout": 2.5,
                "insecure_dev": False,
                "alert_email": [],
                "database": "sqlite://",
            },
        ),
        ({"T_BATCH_SIZE": "7"}, [], {"batch_size": 7}),
        ({"T_BATCH_SIZE": "7"}, ["--batch-size", "9"], {"batch_size": 9}),
        ({"T_TIMEOUT": "0.5"}, [], {"timeout": 0.5}),
        ({"T_INSECURE_DEV": "yes"}, [], {"insecure_dev": True}),
        ({"T_INSECURE_DEV": "off"}, [], {"insecure_dev": False}),
        ({}, ["--insecure-dev"], {"insecure_dev": True}),
        ({"T_ALERT_EMAIL": "a@x, b@x,"}, [], {"alert_email": ["a@x", "b@x"]}),
        ({"T_ALERT_EMAIL": "a@x"}, ["--alert-email", "c@x"], {"alert_email": ["c@x"]}),
        ({"T_URL": "pg://u"}, [], {"database": "pg://u"}),
        ({"T_URL": "pg://u", "T_DATABASE": "pg://d"}, [], {"database": "pg://d"}),
        ({"T_URL": "pg://u", "T_DATABASE": ""}, [], {"database": "pg://u"}),
        ({"T_DATABASE": ""}, [], {"database": ""}),
    ],
)
def test_precedence(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argv: list[str], expected: dict[str, object]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = parser().parse_args(["serve", *argv])
    for field, want in expected.items():
        assert getattr(args, field) == want
        assert type(getattr(args, field)) is type(want)


@pytest.mark.parametrize(
    ("env", "argv", "says"),
    [
        ({"T_BATCH_SIZE": "abc"}, [], "argument --batch-size: invalid value 'abc' from T_BATCH_SIZE"),
        ({}, ["--batch-size", "abc"], "argument --batch-size: invalid value 'abc' (expected int)"),
        ({"T_TIMEOUT": "soon"}, [], "argument --timeout: invalid value 'soon' from T_TIMEOUT"),
        ({"T_INSECURE_DEV": "maybe"}, [], "--insecure-dev: invalid value 'maybe' from T_INSECURE_DEV"),
    ],
)
def test_bad_values_are_usage_errors(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    argv: list[str],
    says: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["serve", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err


def test_help_never_converts(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("T_BATCH_SIZE", "abc")
    monkeypatch.setenv("T_INSECURE_DEV", "maybe")
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["serve", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "env T_BATCH_SIZE; default 200" in out
    assert "env T_DATABASE or T_URL" in out


@pytest.mark.parametrize(
    ("text", "value"), [("1", True), ("TRUE", True), ("on", True), ("", False), ("No", False), ("0", False)]
)
def test_boolean_words(text: str, value: bool) -> None:
    assert boolean(text) is value


def test_csv_and_config_default() -> None:
    assert csv_list(" a, ,b,") == ["a", "b"]
    assert config_default(Config, "hosts") == ["a"]
    with pytest.raises(ValueError, match="no field"):
        config_default(Config, "nope")
    assert isinstance(parser(), argparse.ArgumentParser)

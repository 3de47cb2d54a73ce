"""``--database-password-file``: the password reaches the driver's connection parameters from the file and
never the URL a process holds, a log line or an error. The PostgreSQL at 127.0.0.1:5432 trusts every
connection, so any password connects: what is checked is where the password goes."""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from svckit.db import PasswordFileError, asyncpg_dsn, create_engine, with_password_file
from svckit.flags import FlagParser
from svckit.runner import add_serve_args

SECRET = "s3cret-Pa55-" + "x" * 8


@pytest.fixture
def password_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "db-password"
    path.write_text(SECRET + "\n")
    return path


async def test_the_password_reaches_the_connection_and_nothing_else(
    pg_url: str, password_file: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = with_password_file(pg_url, str(password_file))
    assert SECRET not in url and "password_file=" in url
    engine = create_engine(url)
    seen: list[dict[str, Any]] = []
    event.listen(engine.sync_engine, "do_connect", lambda _d, _r, _a, kw: seen.append(dict(kw)))
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(sa.text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()
    assert seen and seen[0]["password"] == SECRET
    assert SECRET not in repr(engine.url) and SECRET not in engine.url.render_as_string()
    dsn, _settings = asyncpg_dsn(url)
    assert SECRET in dsn and "password_file" not in dsn  # the LISTEN connection's, held in memory only
    assert SECRET not in caplog.text


async def test_a_failed_connection_says_nothing_of_the_password(
    password_file: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A port nothing listens on (the discard port of loopback).
    url = with_password_file("postgresql+asyncpg://postgres@127.0.0.1:9/test", str(password_file))
    engine = create_engine(url)
    try:
        with pytest.raises(Exception) as exc:
            async with engine.connect():
                pass
    finally:
        await engine.dispose()
    text = "".join(str(e) + repr(e) for e in (exc.value, exc.value.__cause__, exc.value.__context__))
    assert SECRET not in text
    assert SECRET not in caplog.text


def test_the_flag_folds_the_file_into_the_database_url(
    pg_url: str, password_file: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = FlagParser(prog="t")
    add_serve_args(p, "t", listen="127.0.0.1:0", metrics="", database="sqlite:///x.db")
    ns = p.parse_args(["--database", pg_url, "--database-password-file", str(password_file)])
    assert "password_file=" in ns.database and SECRET not in ns.database
    monkeypatch.setenv("T_DATABASE_PASSWORD_FILE", str(password_file))
    p = FlagParser(prog="t")
    add_serve_args(p, "t", listen="127.0.0.1:0", metrics="", database="sqlite:///x.db")
    assert "password_file=" in p.parse_args(["--database", pg_url]).database


@pytest.mark.parametrize(
    ("content", "words"), [(None, "No such file"), ("", "is empty")], ids=["missing", "empty"]
)
def test_an_unreadable_file_is_a_usage_error_naming_the_file(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], content: str | None, words: str
) -> None:
    path = tmp_path / "pw"
    if content is not None:
        path.write_text(content)
    p = FlagParser(prog="t")
    add_serve_args(p, "t", listen="127.0.0.1:0", metrics="", database="sqlite:///x.db")
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--database", "postgresql://u@h/d", "--database-password-file", str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err and str(path) in err and "Traceback" not in err


def test_a_password_file_is_refused_for_sqlite(password_file: pathlib.Path) -> None:
    with pytest.raises(PasswordFileError):
        with_password_file("sqlite+aiosqlite:///x.db", str(password_file))

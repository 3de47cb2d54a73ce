"""A secret file that is there but not the service's user's to read (root wrote it under ``umask 077``; the
container runs as uid 10001) is named as exactly that at start: which file, permission denied, the uid the
service runs as and what to do; never a suggestion to make new certificates or keys.

The services are started as real processes. Run by root, the process is started without the capabilities
that let root read any file (so a file owned by another user, mode 0600, is refused to it as it would be to
uid 10001); run by another user, the file is made mode 0000."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from svckit import devca
from svckit.secretbox import write_new_key

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
NOBODY = 65534


def unreadable(path: pathlib.Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
        path.chmod(0o600)
    else:
        path.chmod(0)


def run_unprivileged(args: list[str]) -> subprocess.CompletedProcess[str]:
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("run as root without setpriv (util-linux): root reads every file")
        prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]
    return subprocess.run(
        [*prefix, sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def expected(path: pathlib.Path) -> str:
    return (
        f"cannot read {path}: permission denied (the service runs as uid {os.geteuid()}; "
        "make it readable by that user)"
    )


@pytest.fixture
def tls_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    d = tmp_path / "tls"
    devca.init_dir(d, ("authsvc", "webhookd"))
    d.chmod(0o755)  # the directory is searchable; the key alone is not the service's
    for name in ("ca.pem", "authsvc.pem", "webhookd.pem", "authsvc.key", "webhookd.key"):
        (d / name).chmod(0o644)
    return d


def test_an_unreadable_tls_key_is_named_not_sent_to_certs_init(
    tmp_path: pathlib.Path, tls_dir: pathlib.Path
) -> None:
    key = pathlib.Path(devca.files(tls_dir, "authsvc")[2])
    unreadable(key)
    db = f"sqlite:///{tmp_path / 'a.db'}"
    done = run_unprivileged(
        [
            "-m",
            "authsvc",
            "serve",
            *devca.flags(tls_dir, "authsvc"),
            "--database",
            db,
            "--listen",
            "127.0.0.1:0",
        ]
    )
    assert done.returncode != 0
    assert f"--tls-key: {expected(key)}" in done.stderr
    assert "certs init" not in done.stderr


def test_a_missing_tls_file_still_points_at_certs_init(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "none"
    done = run_unprivileged(
        [
            "-m",
            "authsvc",
            "serve",
            "--tls-ca",
            str(missing),
            "--database",
            "sqlite://",
            "--listen",
            "127.0.0.1:0",
        ]
    )
    assert done.returncode != 0
    assert f"No such file or directory: {missing}" in done.stderr and "svcctl certs init" in done.stderr


@pytest.mark.parametrize(
    ("service", "flag"),
    [
        ("authsvc", "--secrets-key-file"),
        ("webhookd", "--secrets-key-file"),
        ("webhookd", "--database-password-file"),
    ],
)
def test_an_unreadable_key_or_password_file_is_named(
    tmp_path: pathlib.Path, tls_dir: pathlib.Path, service: str, flag: str
) -> None:
    secret = tmp_path / "secret"
    if flag == "--database-password-file":
        secret.write_text("s3cret-password\n")
        db = "postgresql://travel@127.0.0.1:5432/travel"
    else:
        write_new_key(secret)
        db = f"sqlite:///{tmp_path / 'a.db'}"
    unreadable(secret)
    listen = ["--listen", "127.0.0.1:0", "--metrics-listen", ""]
    done = run_unprivileged(
        ["-m", service, "serve", *devca.flags(tls_dir, service), "--database", db, flag, str(secret), *listen]
    )
    assert done.returncode != 0
    assert expected(secret) in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "s3cret" not in done.stderr

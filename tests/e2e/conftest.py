"""Fixtures the end-to-end tests share: an HTTPS webhook receiver (webhookd.testing.Receiver) with a
certificate of a trustme CA of its own, and that CA's file for webhookd's ``--ca-bundle``."""

from __future__ import annotations

import pathlib
import ssl
from collections.abc import Iterator

import pytest
import trustme

from webhookd.testing import Receiver


@pytest.fixture
def tls(tmp_path: pathlib.Path) -> tuple[ssl.SSLContext, str]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    return ctx, str(tmp_path / "ca.pem")


@pytest.fixture
def receiver(tls: tuple[ssl.SSLContext, str]) -> Iterator[Receiver]:
    r = Receiver(tls[0]).start()
    yield r
    r.stop()

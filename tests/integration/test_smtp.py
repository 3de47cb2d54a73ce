"""svckit.smtp against a real SMTP server (aiosmtpd): plain to a relay that offers no STARTTLS, STARTTLS with
authentication (a trustme certificate the client verifies), implicit TLS; credentials never sent over a
plain connection, a required STARTTLS never skipped, a refused password named without the password, an
unreachable server told apart from a refusal; and the settings as the services read them from flags."""

from __future__ import annotations

import argparse
import os
import pathlib
import ssl
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from svckit.flags import FlagParser
from svckit.smtp import (
    MailRefused,
    MailUnreachable,
    SmtpSettings,
    add_smtp_flags,
    send,
    settings_from_args,
)
from tests.support import free_port

USER, PASSWORD = "mailer", "s3cret-smtp-pass"


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bool, bool]] = []  # (recipients, over TLS, authenticated)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        tls = server.transport.get_extra_info("ssl_object") is not None  # after STARTTLS, or implicit TLS
        self.messages.append((list(envelope.rcpt_tos), tls, bool(session.authenticated)))
        return "250 OK"


def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (USER.encode(), PASSWORD.encode())
    return AuthResult(success=ok, handled=False)  # not handled: aiosmtpd answers 235 or 535 itself


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: pathlib.Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


@pytest.fixture
def plain() -> Iterator[tuple[Inbox, int]]:
    inbox, port = Inbox(), free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture
def starttls(ca: trustme.CA) -> Iterator[tuple[Inbox, int]]:
    """STARTTLS required before anything, and AUTH required (only over TLS)."""
    inbox, port = Inbox(), free_port()
    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=port,
        tls_context=server_context(ca),
        require_starttls=True,
        auth_required=True,
        auth_require_tls=True,
        authenticator=authenticator,
    )
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture
def implicit(ca: trustme.CA) -> Iterator[tuple[Inbox, int]]:
    inbox, port = Inbox(), free_port()
    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=port,
        ssl_context=server_context(ca),
        auth_required=True,
        auth_require_tls=False,  # aiosmtpd's own check knows only STARTTLS; the socket is TLS throughout
        authenticator=authenticator,
    )
    controller.start()
    yield inbox, port
    controller.stop()


def message(to: str = "ops@partner.test") -> EmailMessage:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "alerts@svc.test", to, "test"
    m.set_content("body")
    return m


async def test_plain_relay_without_starttls_on_auto(plain: tuple[Inbox, int]) -> None:
    await send(SmtpSettings("127.0.0.1", plain[1]), message())
    assert plain[0].messages == [(["ops@partner.test"], False, False)]


async def test_starttls_and_authentication(starttls: tuple[Inbox, int], ca_file: str) -> None:
    settings = SmtpSettings(
        "127.0.0.1", starttls[1], security="starttls", username=USER, password=PASSWORD, ca_bundle=ca_file
    )
    await send(settings, message())
    assert starttls[0].messages == [(["ops@partner.test"], True, True)]


async def test_auto_upgrades_when_the_server_offers_starttls(
    starttls: tuple[Inbox, int], ca_file: str
) -> None:
    """``auto`` takes STARTTLS when offered (this server requires it, and authentication: refused after
    the upgrade, so no message went plain)."""
    with pytest.raises(MailRefused, match="530"):
        await send(SmtpSettings("127.0.0.1", starttls[1], ca_bundle=ca_file), message())
    assert starttls[0].messages == []


async def test_implicit_tls_and_authentication(implicit: tuple[Inbox, int], ca_file: str) -> None:
    settings = SmtpSettings(
        "127.0.0.1", implicit[1], security="tls", username=USER, password=PASSWORD, ca_bundle=ca_file
    )
    await send(settings, message())
    assert implicit[0].messages == [(["ops@partner.test"], True, True)]


async def test_a_refused_password_is_a_refusal_that_does_not_show_it(
    starttls: tuple[Inbox, int], ca_file: str
) -> None:
    wrong = "wrong-" + PASSWORD
    settings = SmtpSettings(
        "127.0.0.1", starttls[1], security="starttls", username=USER, password=wrong, ca_bundle=ca_file
    )
    with pytest.raises(MailRefused) as caught:
        await send(settings, message())
    assert "535" in str(caught.value) and wrong not in str(caught.value)
    assert wrong not in repr(settings) and starttls[0].messages == []


async def test_required_starttls_is_never_skipped(plain: tuple[Inbox, int]) -> None:
    """A server that offers no STARTTLS (or a man in the middle that strips it): nothing is sent."""
    with pytest.raises(MailRefused, match="STARTTLS"):
        await send(SmtpSettings("127.0.0.1", plain[1], security="starttls"), message())
    assert plain[0].messages == []


async def test_an_untrusted_certificate_is_refused(starttls: tuple[Inbox, int]) -> None:
    settings = SmtpSettings("127.0.0.1", starttls[1], security="starttls", username=USER, password=PASSWORD)
    with pytest.raises((MailUnreachable, MailRefused), match=r"(?i)certificate"):
        await send(settings, message())  # the system's CAs do not know the test CA
    assert starttls[0].messages == []


async def test_an_unreachable_server_is_an_oserror() -> None:
    with pytest.raises(MailUnreachable) as caught:
        await send(SmtpSettings("127.0.0.1", free_port(), timeout=2), message())
    assert isinstance(caught.value, OSError)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"username": USER, "password": PASSWORD}, "needs --smtp-security starttls or tls"),
        (
            {"username": USER, "password": PASSWORD, "security": "none"},
            "needs --smtp-security starttls or tls",
        ),
        ({"username": USER, "security": "starttls"}, "needs a password"),
        ({"security": "ssl"}, "is not one of auto, starttls, tls, none"),
    ],
)
def test_settings_that_do_not_hold_together(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SmtpSettings("mail.example", 587, **kwargs)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = FlagParser(prog="test")
    add_smtp_flags(parser, "testsvc")
    return parser.parse_args(argv)


def test_settings_from_flags_with_a_password_file(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TESTSVC_SMTP_PASSWORD", raising=False)
    secret = tmp_path / "smtp-password"
    secret.write_text(PASSWORD + "\n")
    args = parse(
        ["--smtp-security", "starttls", "--smtp-username", USER, "--smtp-password-file", str(secret)]
    )
    settings = settings_from_args(args, "testsvc", "mail.example", 587, "a@svc.test")
    assert (settings.host, settings.port, settings.sender, settings.security) == (
        "mail.example",
        587,
        "a@svc.test",
        "starttls",
    )
    assert (settings.username, settings.password, settings.timeout) == (USER, PASSWORD, 15.0)
    assert PASSWORD not in repr(settings)


def test_settings_from_the_environment_and_errors(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESTSVC_SMTP_PASSWORD", PASSWORD)
    monkeypatch.setenv("TESTSVC_SMTP_SECURITY", "tls")
    monkeypatch.setenv("TESTSVC_SMTP_USERNAME", USER)
    settings = settings_from_args(parse(["--smtp-timeout", "3"]), "testsvc", "mail.example", 465, "")
    assert (settings.security, settings.password, settings.timeout) == ("tls", PASSWORD, 3.0)
    monkeypatch.delenv("TESTSVC_SMTP_PASSWORD")
    with pytest.raises(SystemExit, match="testsvc: --smtp-username needs a password"):
        settings_from_args(parse([]), "testsvc", "mail.example", 465, "")
    missing = str(tmp_path / "absent")
    with pytest.raises(SystemExit, match=r"testsvc: --smtp-password-file: .*absent"):
        settings_from_args(parse(["--smtp-password-file", missing]), "testsvc", "mail.example", 465, "")


def test_webhookd_and_the_portal_take_the_same_settings(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from portal.__main__ import build_parser as portal_parser
    from webhookd._server import build_parser as webhookd_parser
    from webhookd._server import config_from_args

    for name in [k for k in os.environ if k.startswith(("WEBHOOKD_", "PORTAL_"))]:
        monkeypatch.delenv(name)
    secret = tmp_path / "smtp-password"
    secret.write_text(PASSWORD)
    flags = ["--smtp-security", "starttls", "--smtp-username", USER, "--smtp-password-file", str(secret)]
    serve = ["serve", "--insecure-dev", "--smtp", "mail.example:587", *flags]
    smtp = config_from_args(webhookd_parser().parse_args(serve)).smtp
    assert smtp == SmtpSettings(
        "mail.example", 587, "webhooks@svc.travel", security="starttls", username=USER, password=PASSWORD
    )
    args = portal_parser().parse_args(["serve", "--smtp-host", "mail.example", "--smtp-port", "587", *flags])
    assert (args.smtp_security, args.smtp_username, args.smtp_password_file) == (
        "starttls",
        USER,
        str(secret),
    )
    plain = ["serve", "--insecure-dev", "--smtp", "mail.example:25", "--smtp-username", USER]
    monkeypatch.setenv("WEBHOOKD_SMTP_PASSWORD", PASSWORD)
    with pytest.raises(SystemExit, match="webhookd: --smtp-username needs --smtp-security starttls or tls"):
        config_from_args(webhookd_parser().parse_args(plain))

"""An endpoint's destination settings (docs/webhooks.md "Destinations"): what a RabbitMQ or NATS
destination names, checked on save with an error naming the field, stored as two JSON values (the
settings in the clear, the credentials sealed like signing secrets: ``webhookd._rows``), shown without
the credentials.

Credentials are write-only: RegisterEndpoint and UpdateEndpoint take them, nothing returns them, and an
update that leaves one empty keeps the stored one (a form that shows "set" need not know it). Broker
hosts pass the same address policy as webhook URLs (``webhookd._ssrf``): a partner's destination never
reaches our private networks or a cloud metadata service.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from svckit.webhook_status import DestinationType
from webhookd._errors import InvalidRequest, UnsafeTarget
from webhookd._ssrf import Policy, Resolver, resolve_checked, system_resolver

MAX_NAME = 255  # AMQP shortstr: exchange, routing key, user; NATS subject and user
MAX_SECRET = 1024
MAX_SERVERS = 8
AMQP_SCHEMES = {"amqp": 5672, "amqps": 5671}
NATS_SCHEMES = {"nats": 4222, "tls": 4222}


@dataclass(frozen=True, slots=True)
class AmqpSettings:
    """A RabbitMQ exchange and routing key of the partner's, and how to log in."""

    host: str
    port: int
    vhost: str
    user: str
    tls: bool
    exchange: str
    routing_key: str
    password: str = field(default="", repr=False)

    @property
    def url(self) -> str:
        """The shown URL: never the password."""
        scheme = "amqps" if self.tls else "amqp"
        user = f"{quote(self.user, safe='')}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}/{quote(self.vhost, safe='')}"

    def targets(self) -> list[tuple[str, int]]:
        return [(self.host, self.port)]

    def pool_key(self) -> tuple[Any, ...]:
        """Endpoints with equal keys may share a connection (same broker, vhost and login)."""
        return (self.host, self.port, self.vhost, self.user, self.password, self.tls)


@dataclass(frozen=True, slots=True)
class NatsServer:
    host: str
    port: int
    tls: bool

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'tls' if self.tls else 'nats'}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class NatsSettings:
    """A NATS JetStream subject of the partner's (a stream of theirs captures it), and how to log in."""

    servers: tuple[NatsServer, ...]
    subject: str
    user: str = ""
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)

    def targets(self) -> list[tuple[str, int]]:
        return [(s.host, s.port) for s in self.servers]

    def pool_key(self) -> tuple[Any, ...]:
        return (tuple(s.url for s in self.servers), self.user, self.password, self.token)


Settings = AmqpSettings | NatsSettings


def _name(value: str, where: str, *, required: bool = False, bad: str = "") -> str:
    if required and not value:
        raise InvalidRequest(f"{where}: is required")
    if len(value.encode()) > MAX_NAME:
        raise InvalidRequest(f"{where}: at most {MAX_NAME} bytes")
    if not value.isprintable() or any(c.isspace() for c in value) or any(c in bad for c in value):
        shown = f" or any of {bad!r}" if bad else ""
        raise InvalidRequest(f"{where}: must not contain whitespace, control characters{shown}")
    return value


def _secret(value: str, where: str) -> str:
    if len(value) > MAX_SECRET or any(c < " " or c == "\x7f" for c in value):
        raise InvalidRequest(f"{where}: at most {MAX_SECRET} characters, no control characters")
    return value


def _host_port(url: str, where: str, schemes: dict[str, int]) -> tuple[str, int, bool, Any]:
    if not url:
        raise InvalidRequest(f"{where}: is required")
    if len(url) > 2048 or any(c.isspace() for c in url) or not url.isprintable():
        raise InvalidRequest(f"{where}: at most 2048 characters, no whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidRequest(f"{where}: not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise InvalidRequest(f"{where}: must start with {' or '.join(s + '://' for s in schemes)}")
    if parts.password is not None:
        raise InvalidRequest(f"{where}: must not contain a password; give it in its own field")
    if parts.query or parts.fragment:
        raise InvalidRequest(f"{where}: must not contain a query or fragment")
    if not parts.hostname:
        raise InvalidRequest(f"{where}: has no host")
    return parts.hostname, port or schemes[scheme], scheme in ("amqps", "tls"), parts


def amqp_settings(msg: Any, stored: Settings | None = None) -> AmqpSettings:
    """Checked settings from an ``AmqpDestination``; an empty password keeps ``stored``'s."""
    host, port, tls, parts = _host_port(msg.url, "amqp.url", AMQP_SCHEMES)
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    vhost = unquote(path) if path else "/"
    _name(vhost, "amqp.url")
    user = _name(unquote(parts.username or ""), "amqp.url")
    password = _secret(msg.password, "amqp.password")
    if not password and isinstance(stored, AmqpSettings):
        password = stored.password
    return AmqpSettings(
        host=host,
        port=port,
        vhost=vhost,
        user=user,
        tls=tls,
        exchange=_name(msg.exchange, "amqp.exchange"),
        routing_key=_name(msg.routing_key, "amqp.routing_key"),
        password=password,
    )


def nats_settings(msg: Any, stored: Settings | None = None) -> NatsSettings:
    """Checked settings from a ``NatsDestination``; an empty password or token keeps ``stored``'s."""
    if not msg.servers:
        raise InvalidRequest("nats.servers: name at least one server (nats://host:4222)")
    if len(msg.servers) > MAX_SERVERS:
        raise InvalidRequest(f"nats.servers: at most {MAX_SERVERS}")
    servers = []
    for i, url in enumerate(msg.servers):
        where = f"nats.servers: server {i + 1}"
        host, port, tls, parts = _host_port(url, where, NATS_SCHEMES)
        if parts.username is not None:
            raise InvalidRequest(f"{where} must not contain a user; give it in nats.user")
        if parts.path not in ("", "/"):
            raise InvalidRequest(f"{where} must not contain a path")
        servers.append(NatsServer(host, port, tls))
    subject = _name(msg.subject, "nats.subject", required=True, bad="*>")
    if subject.startswith("$") or "" in subject.split("."):
        raise InvalidRequest("nats.subject: dot-separated tokens, none empty, not a $ system subject")
    password = _secret(msg.password, "nats.password")
    token = _secret(msg.token, "nats.token")
    if token and (msg.user or password):
        raise InvalidRequest("nats.token: give a token or a user and password, not both")
    # A token replaces a stored login, a user or password a stored token; left out, the stored ones stay.
    if isinstance(stored, NatsSettings) and not token:
        password = password or stored.password
        token = "" if (msg.user or password) else stored.token
    return NatsSettings(tuple(servers), subject, _name(msg.user, "nats.user"), password, token)


async def check_hosts(
    settings: Settings, where: str, policy: Policy, resolver: Resolver = system_resolver
) -> None:
    """The broker hosts pass the webhook URL address policy (``webhookd._ssrf``), resolved now."""
    for host, port in settings.targets():
        try:
            await resolve_checked(host, port, policy, resolver)
        except UnsafeTarget as exc:
            raise UnsafeTarget(f"{where}: {str(exc).removeprefix('url: ')}") from None


# Stored form: settings JSON (the clear part) and credentials JSON (sealed by ``webhookd._rows``).


def stored_json(settings: Settings | None) -> tuple[str, str]:
    """(settings, credentials) as stored; ("", "") for a type without settings."""
    if settings is None:
        return "", ""
    secret_names = ("password", "token")
    values = dataclasses.asdict(settings)
    secrets = {k: values.pop(k) for k in secret_names if values.get(k)}
    for k in secret_names:
        values.pop(k, None)
    return json.dumps(values, sort_keys=True), json.dumps(secrets, sort_keys=True) if secrets else ""


def settings_of(kind: DestinationType, clear: str, secrets: str) -> Settings | None:
    if kind not in (DestinationType.AMQP, DestinationType.NATS) or not clear:
        return None
    values: dict[str, Any] = json.loads(clear) | (json.loads(secrets) if secrets else {})
    if kind is DestinationType.AMQP:
        return AmqpSettings(**values)
    servers = tuple(NatsServer(**s) for s in values.pop("servers"))
    return NatsSettings(servers=servers, **values)


def server_urls(settings: NatsSettings) -> Sequence[str]:
    return [s.url for s in settings.servers]


def shown_target(kind: DestinationType, url: str, clear: str) -> str:
    """Where an endpoint's deliveries go, in one line for an alert e-mail and the operational events' ``url``
    (never a credential, nor the login's user): an http endpoint's URL; ``amqp://host:port/vhost
    exchange/routing-key`` (``(default)`` for the default exchange); ``nats://host:port … subject``;
    ``polling`` (no URL: its consumers come to us)."""
    settings = settings_of(kind, clear, "")
    if isinstance(settings, AmqpSettings):
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        scheme = "amqps" if settings.tls else "amqp"
        where = f"{scheme}://{host}:{settings.port}/{quote(settings.vhost, safe='')}"
        return f"{where} {settings.exchange or '(default)'}/{settings.routing_key}"
    if isinstance(settings, NatsSettings):
        return f"{' '.join(server_urls(settings))} {settings.subject}"
    return url or str(kind)

"""Which environment a request is for, decided from its Host header (decisions.md "Environments")."""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Iterable

from edge.exceptions import EdgeError
from svckit.apikeys import prefix_environment
from svckit.vocabulary import Environment as Environment  # the one the edge uses, re-exported


class HostMap:
    """Configured hosts (``name`` or ``name:port``, case-insensitive) -> environment."""

    def __init__(self, live: Iterable[str], sandbox: Iterable[str]) -> None:
        self._hosts: dict[str, Environment] = {}
        for env, hosts in ((Environment.LIVE, live), (Environment.SANDBOX, sandbox)):
            for host in hosts:
                host = host.strip().lower()
                if not host:
                    continue
                other = self._hosts.get(host)
                if other is not None and other is not env:
                    raise ValueError(f"host {host!r} is configured as both live and sandbox")
                self._hosts[host] = env

    def environment(self, host: str | None) -> Environment:
        """The environment of a Host header value; 421 misdirected_request for any other host."""
        if host:
            env = self._hosts.get(host) or self._hosts.get(host.strip().lower().rstrip("."))
            if env is not None:
                return env
        raise EdgeError(
            f"Host {host!r} is neither a live nor a sandbox host of this service"
            if host
            else "the Host header is missing",
            type="misdirected_request",
        )

    def hosts(self, env: Environment) -> list[str]:
        return [h for h, e in self._hosts.items() if e is env]


LOOPBACK_NAMES = {
    "127.0.0.1": ("localhost", "127.0.0.1"),
    "0.0.0.0": ("localhost", "127.0.0.1"),
    "::1": ("localhost", "[::1]"),
    "::": ("localhost", "127.0.0.1", "[::1]"),
    "localhost": ("localhost", "127.0.0.1"),
}


def listen_hosts(listen_host: str, port: int) -> list[str]:
    """The Host values that reach a listener bound to ``listen_host:port``: the default accepted hosts
    follow where the edge listens (moving a port must not turn every request into 421).

    Loopback and wildcard addresses are reached as ``localhost`` and the loopback address; any other
    address or name as itself. Port 80 is also reached without a port (clients omit the default).
    """
    host = listen_host.strip().strip("[]").lower() or "127.0.0.1"
    names = LOOPBACK_NAMES.get(host) or ((f"[{host}]" if ":" in host else host),)
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:
        hosts += list(names)
    return hosts


def key_environment(api_key: str) -> Environment | None:
    """The environment a key's prefix names (any configured brand: svckit.apikeys)."""
    env = prefix_environment(api_key)
    return None if env is None else Environment(env)


def deprecation_headers(
    status_expiring: bool, rotated_at: dt.datetime | None, expires_at: dt.datetime | None
) -> dict[str, str]:
    """RFC 9745 ``Deprecation`` and RFC 8594 ``Sunset`` for a key in its rotation grace period.

    ``Deprecation`` is ``@<unix seconds>`` of when the key was deprecated, i.e. rotated out (RFC 9745
    §2.1: the deprecation date, in the past once it happened); ``Sunset`` the HTTP-date it stops working.
    """
    if not status_expiring or expires_at is None:
        return {}
    headers = {"Sunset": email.utils.formatdate(int(expires_at.timestamp()), usegmt=True)}
    if rotated_at is not None:
        headers["Deprecation"] = f"@{int(rotated_at.timestamp())}"
    return headers

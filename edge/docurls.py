"""The base of every error's ``docUrl`` (``<base>/errors#<type>``, edge.responses.error_body).

An explicit ``--docs-base`` (``EdgeConfig.docs_base``) is that base for every answer. Without one the
edge's own docs are (edge.blueprints.docs, ``GET /docs/<page>``): the base is ``<scheme>://<Host>/docs``,
the host the request came to, so the link resolves on the very host that answered, with no
configuration. Only a Host this edge serves is echoed; any other (a 421 misdirected_request, a missing
Host) gets the first configured live host. Bases are made once per Host value and kept (bounded: Host is
the client's to choose), so an error answer costs one dict look-up more than with a fixed base.
"""

from __future__ import annotations

from collections.abc import Sequence

from edge.environments import HostMap
from edge.exceptions import EdgeError

__all__ = ["DOCS_PATH", "DocBases"]

# Where the edge serves the docs (edge.blueprints.docs).
DOCS_PATH = "/docs"
# Bases kept at most: the configured hosts' spellings are few; past this one is made per answer.
MAX_KEPT = 64
SECURE = frozenset({"https", "wss"})


class DocBases:
    def __init__(self, configured: str, hosts: HostMap, live_hosts: Sequence[str]) -> None:
        self.configured = configured.rstrip("/")
        self.hosts = hosts
        self.fallback_host = next((h.strip() for h in live_hosts if h.strip()), "localhost")
        self._kept: dict[tuple[bool, str | None], str] = {}

    def base(self, scheme: str, host: str | None) -> str:
        """The docs base for an answer on ``scheme`` (Sanic's ``request.scheme``: http, https, ws or
        wss; a WebSocket handshake's docs are on http(s) too) to a request whose Host header was ``host``."""
        if self.configured:
            return self.configured
        key = (scheme in SECURE, host)
        found = self._kept.get(key)
        if found is None:
            found = self._make(*key)
            if len(self._kept) < MAX_KEPT:
                self._kept[key] = found
        return found

    def _make(self, secure: bool, host: str | None) -> str:
        served = host
        try:
            self.hosts.environment(host)
        except EdgeError:  # not a host of this edge: never echoed into a link
            served = self.fallback_host
        return f"{'https' if secure else 'http'}://{served}{DOCS_PATH}"

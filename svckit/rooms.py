"""svckit's rooms: every module of svckit belongs to exactly one, and a module imports svckit modules of
its own room or of the rooms below it only (``tests/unit/test_imports.py`` checks both, statically, lazy
imports counted; a new module fails the test until it is filed here).

The rooms, from the bottom:

    vocabulary  data and rules every process needs: ids, words, scopes, the event catalog and its check,
                the error table, durations, signing, the request id's logging context, the flags'
                grammar. Standard library, gRPC/protobuf, cryptography and jsonschema only.
    clients     what a caller needs to talk to authsvc and webhookd: svckit.clients and svckit.tls.
    net         HTTP and the addresses around it: the outbound HTTP client, response heads, address
                blocks, default addresses, refusal tallies, per-source tables; outbound mail (SMTP).
    storage     what lies at rest: the database, migrations, sealed secrets and their re-sealing, the
                development CA's files, the classification of a database outage.
    serving     the process: gRPC and web servers, the serve command, metrics, readiness, pacing, traces,
                the allow list, the TLS flags.

The vocabulary and clients rooms are the client distribution (``clients/pyproject.toml``, built by
``scripts/build_client_package``): a product service installs them with gRPC, protobuf, cryptography
and jsonschema, and nothing of the servers (docs/product-services.md). The rooms are declared here as
data rather than as subpackages, so every import path stays as it was (docs/architecture.md, "Code
layout").
"""

from __future__ import annotations

from typing import Final

# Bottom first: a room may import its own and the rooms before it.
ROOMS: Final = ("vocabulary", "clients", "net", "storage", "serving")

# The rooms a product service's client distribution carries (all of their modules).
CLIENT_ROOMS: Final = ("vocabulary", "clients")

BY_ROOM: Final[dict[str, tuple[str, ...]]] = {
    "vocabulary": (
        "svckit",
        "accountkinds",
        "allowlist",
        "cancellation",
        "apikeys",
        "catalog",
        "certification",
        "certreport",
        "clock",
        "durations",
        "ed25519verify",
        "edgeassertion",
        "errors",
        "eventcheck",
        "eventkinds",
        "events",
        "eventschemas",
        "fileerrors",
        "filtercheck",
        "flags",
        "freetext",
        "gcra",
        "ids",
        "jsonmatch",
        "logs",
        "looktobook",
        "pages",
        "portal_calls",
        "protos",
        "prototables",
        "publishers",
        "quota",
        "resources",
        "roles",
        "rooms",
        "scopes",
        "signing",
        "thinevents",
        "usagecounts",
        "vocabulary",
        "webhook_status",
    ),
    "clients": (
        "clients",
        "clients.auth",
        "clients.channels",
        "clients.errors",
        "clients.hooks",
        "clients.interceptors",
        "clients.rpc",
        "tls",
    ),
    "net": (
        "addresses",
        "connlimits",
        "http",
        "netblocks",
        "refusallog",
        "responsehead",
        "smtp",
        "untiltable",
    ),
    "storage": ("db", "devca", "migrations", "outage", "reseal", "secretbox"),
    "serving": (
        "connguard",
        "frameworks",
        "grpc_server",
        "idlewait",
        "metrics",
        "pacing",
        "peers",
        "readiness",
        "requesttarget",
        "runner",
        "tlsflags",
        "tracing",
        "webserver",
    ),
}


def _module(name: str) -> str:
    return name if name == "svckit" else f"svckit.{name}"


# Module (``svckit.tls``; the package itself is ``svckit``) -> its room.
ROOM_OF: Final[dict[str, str]] = {_module(name): room for room, names in BY_ROOM.items() for name in names}


def rank(room: str) -> int:
    """The room's height: 0 for vocabulary."""
    return ROOMS.index(room)


def may_import(importer: str, imported: str) -> bool:
    """May svckit module ``importer`` import svckit module ``imported``? (Both filed in ``ROOM_OF``.)"""
    return rank(ROOM_OF[imported]) <= rank(ROOM_OF[importer])

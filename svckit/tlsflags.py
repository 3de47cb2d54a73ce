"""A process's TLS settings: the ``--tls-ca``, ``--tls-cert``, ``--tls-key`` and ``--insecure-dev`` flags
every server and svcctl take, the files they name read into a ``svckit.tls.Tls`` (or a clear exit), and
the certificate's expiry on /metrics.

Serving plumbing (flags, Prometheus), kept apart from ``svckit.tls`` so that the client library, which a
product service installs on its own (docs/product-services.md), carries no command line and no metrics.
"""

from __future__ import annotations

import argparse
from typing import Any

from svckit.flags import FlagParser, add_flag, env_name, or_default
from svckit.tls import DEV_DIR, Tls, TlsError, TlsFileUnreadable, seconds_until_expiry

__all__ = ["add_tls_args", "export_expiry", "tls_from_args"]


def add_tls_args(parser: argparse.ArgumentParser, service: str) -> None:
    """``--tls-ca``, ``--tls-cert``, ``--tls-key`` and ``--insecure-dev``, each with an environment
    fallback ``<SERVICE>_<FLAG>``; the files default to the development certificates ``svcctl certs
    init`` makes. ``parser`` is a ``svckit.flags.FlagParser`` (or one of its sub-parsers): a word in
    ``<SERVICE>_INSECURE_DEV`` that is neither on nor off is a usage error."""
    if not isinstance(parser, FlagParser):
        # A plain parser would never convert the variable's word: "off" would switch plaintext on.
        raise TypeError("add_tls_args: the parser must be a svckit.flags.FlagParser")
    files = (
        ("ca", "ca.pem", "the CA certificate peers must chain to"),
        ("cert", f"{service}.pem", "this process's certificate"),
        ("key", f"{service}.key", "its private key"),
    )
    for flag, name, what in files:
        default = f"{DEV_DIR}/{name}"
        add_flag(
            parser,
            f"--tls-{flag}",
            env=env_name(service, f"tls_{flag}"),
            type=or_default(default),
            default=default,
            help=f"PEM file: {what}",
        )
    what = "plaintext gRPC with no caller authentication, for development only"
    add_flag(parser, "--insecure-dev", env=env_name(service, "insecure_dev"), switch=True, help=what)


def tls_from_args(args: argparse.Namespace) -> Tls | None:
    """The configured TLS files, or None with ``--insecure-dev``; a clear exit when they are unusable."""
    if args.insecure_dev:
        return None
    try:
        tls = Tls.from_files(args.tls_ca, args.tls_cert, args.tls_key)
    except TlsFileUnreadable as exc:  # there, but not this user's to read: making new ones is no answer
        raise SystemExit(str(exc)) from None
    except TlsError as exc:
        raise SystemExit(
            f"{exc} (make development certificates with `svcctl certs init`, or pass --insecure-dev "
            "for plaintext)"
        ) from None
    export_expiry(tls)
    return tls


_EXPIRY: list[Tls] = []


def export_expiry(tls: Tls) -> None:
    """``tls_certificate_expiry_seconds`` on /metrics from now on: seconds until ``tls``'s certificate
    expires, worked out at each scrape (docs/alerts.md pages on it). A process without TLS exports no
    such family, rather than a 0 that would read as "expired"."""
    from prometheus_client import REGISTRY
    from prometheus_client.core import GaugeMetricFamily

    class Expiry:
        def collect(self) -> Any:
            if _EXPIRY:
                yield GaugeMetricFamily(
                    "tls_certificate_expiry_seconds",
                    "Seconds until this process's own certificate (--tls-cert) expires; negative once it has",
                    value=seconds_until_expiry(_EXPIRY[-1]),
                )

    if not _EXPIRY:
        REGISTRY.register(Expiry())
    _EXPIRY[:] = [tls]

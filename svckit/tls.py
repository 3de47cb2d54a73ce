"""Mutual TLS between the services: the PEM files a process is configured with, the flags naming them,
server credentials that require a client certificate, and channels that verify the server they expect.

Every service and svcctl holds one certificate from the deployment's CA. Its common name is the
identity the other side sees (``svckit.peers``); a server's certificate also names the service as a DNS
subject alternative name, which clients verify (``grpc.ssl_target_name_override``), so a client knows it
reached authsvc and not another holder of a certificate from the same CA, whatever the address.
Plaintext is only possible with an explicit ``--insecure-dev``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from svckit.flags import FlagParser, add_flag, env_name
from svckit.runner import or_default

DEV_DIR = "var/tls"


class TlsError(Exception):
    """A TLS file that is missing, unreadable or does not fit the others; the message names the flag."""


@dataclass(frozen=True)
class Tls:
    """The CA that vouches for peers, and this process's certificate chain and private key (PEM)."""

    ca: bytes
    cert: bytes
    key: bytes = field(repr=False)
    identity: str = ""

    @classmethod
    def from_files(cls, ca: str, cert: str, key: str) -> Tls:
        ca_pem, cert_pem, key_pem = (_read(p, flag) for p, flag in ((ca, "ca"), (cert, "cert"), (key, "key")))
        try:
            x509.load_pem_x509_certificates(ca_pem)
        except ValueError:
            raise TlsError(f"--tls-ca: no PEM certificate in {ca}") from None
        try:
            leaf = x509.load_pem_x509_certificates(cert_pem)[0]
        except ValueError:
            raise TlsError(f"--tls-cert: no PEM certificate in {cert}") from None
        try:
            private = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError):
            raise TlsError(f"--tls-key: no unencrypted PEM private key in {key}") from None
        if private.public_key() != leaf.public_key():
            raise TlsError(f"--tls-key: {key} is not the key of the certificate {cert}")
        return cls(ca_pem, cert_pem, key_pem, common_name(leaf))

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )


def common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = names[0].value if names else ""
    return value if isinstance(value, str) else value.decode()


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsError(f"--tls-{flag}: {exc.strerror}: {path}") from None


def channel(
    target: str,
    tls: Tls | None,
    server: str,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
) -> grpc.aio.Channel:
    """A channel to the service named ``server`` at ``target``: mutual TLS, the server's certificate
    verified to name ``server``; plaintext only when ``tls`` is None (``--insecure-dev``)."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=list(options), interceptors=list(interceptors))
    return grpc.aio.secure_channel(
        target,
        tls.channel_credentials(),
        options=[*options, ("grpc.ssl_target_name_override", server)],
        interceptors=list(interceptors),
    )


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
        return Tls.from_files(args.tls_ca, args.tls_cert, args.tls_key)
    except TlsError as exc:
        raise SystemExit(
            f"{exc} (make development certificates with `svcctl certs init`, or pass --insecure-dev "
            "for plaintext)"
        ) from None

"""Mutual TLS between the services: the PEM files a process is configured with, the flags naming them,
server credentials that require a client certificate, and channels that verify the server they expect.

Every service and svcctl holds one certificate from the deployment's CA. Its common name is the
identity the other side sees (``svckit.peers``); a server's certificate also names the service as a DNS
subject alternative name, which clients verify (``grpc.ssl_target_name_override``), so a client knows it
reached authsvc and not another holder of a certificate from the same CA, whatever the address.
Plaintext is only possible with an explicit ``--insecure-dev``.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from svckit.fileerrors import cannot_read

DEV_DIR = "var/tls"
# What a TlsError calls the three files by default: the flags of svckit.tlsflags.add_tls_args.
FLAG_NAMES = ("--tls-ca", "--tls-cert", "--tls-key")


class TlsError(Exception):
    """A TLS file that is missing, unreadable or does not fit the others; the message names the flag."""


class TlsFileUnreadable(TlsError):
    """A TLS file that is there but this process's user may not read (a deployment's ownership mistake)."""


@dataclass(frozen=True)
class Tls:
    """The CA that vouches for peers, and this process's certificate chain and private key (PEM)."""

    ca: bytes
    cert: bytes
    key: bytes = field(repr=False)
    identity: str = ""
    # (CA, certificate, key) paths when read from files: what ``ssl_context`` loads (Python's ssl module
    # takes a certificate chain and key from files only).
    paths: tuple[str, str, str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_files(cls, ca: str, cert: str, key: str, *, names: tuple[str, str, str] = FLAG_NAMES) -> Tls:
        """The three PEM files; an error names the file's setting (``names``: the flags by default)."""
        ca_name, cert_name, key_name = names
        ca_pem, cert_pem, key_pem = (_read(p, name) for p, name in zip((ca, cert, key), names, strict=True))
        try:
            x509.load_pem_x509_certificates(ca_pem)
        except ValueError:
            raise TlsError(f"{ca_name}: no PEM certificate in {ca}") from None
        try:
            leaf = x509.load_pem_x509_certificates(cert_pem)[0]
        except ValueError:
            raise TlsError(f"{cert_name}: no PEM certificate in {cert}") from None
        try:
            private = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError):
            raise TlsError(f"{key_name}: no unencrypted PEM private key in {key}") from None
        if private.public_key() != leaf.public_key():
            raise TlsError(f"{key_name}: {key} is not the key of the certificate {cert}")
        return cls(ca_pem, cert_pem, key_pem, common_name(leaf), (ca, cert, key))

    @classmethod
    def from_env(cls, prefix: str, environ: Mapping[str, str] | None = None) -> Tls:
        """The PEM files named by ``<PREFIX>_TLS_CA``, ``<PREFIX>_TLS_CERT`` and ``<PREFIX>_TLS_KEY``
        (``Tls.from_env("HOTELS")``: a product service's own variables). A variable unset or empty, or a
        file that is unusable, is a TlsError naming the variable."""
        env = os.environ if environ is None else environ
        names = tuple(f"{prefix.upper()}_TLS_{part}" for part in ("CA", "CERT", "KEY"))
        missing = [name for name in names if not env.get(name)]
        if missing:
            raise TlsError(f"{', '.join(missing)}: not set (the PEM files of this service's certificate)")
        ca, cert, key = (env[name] for name in names)
        return cls.from_files(ca, cert, key, names=(names[0], names[1], names[2]))

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )

    def ssl_context(self, *, server: bool) -> ssl.SSLContext:
        """Mutual TLS over HTTPS (the edge calling a product upstream, the upstream serving it): peers
        verified against the CA only, this process's certificate presented. A server context requires a
        client certificate; a client context also checks the server's name against the URL's host."""
        if self.paths is None:
            raise TlsError("HTTPS needs the TLS files: build the Tls with Tls.from_files or Tls.from_env")
        purpose = ssl.Purpose.CLIENT_AUTH if server else ssl.Purpose.SERVER_AUTH
        context = ssl.create_default_context(purpose, cadata=self.ca.decode())
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.paths[1], self.paths[2])
        if server:
            context.verify_mode = ssl.CERT_REQUIRED
        return context


def common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = names[0].value if names else ""
    return value if isinstance(value, str) else value.decode()


def _read(path: str, name: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except PermissionError as exc:
        raise TlsFileUnreadable(f"{name}: {cannot_read(exc, path)}") from None
    except OSError as exc:
        raise TlsError(f"{name}: {cannot_read(exc, path)}") from None


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


def not_after(cert_pem: bytes) -> float:
    """When the first certificate of ``cert_pem`` (a process's own, its chain after it) expires: epoch
    seconds."""
    return x509.load_pem_x509_certificates(cert_pem)[0].not_valid_after_utc.timestamp()


def seconds_until_expiry(tls: Tls, now: float | None = None) -> float:
    """Seconds until this process's certificate expires (negative once it has)."""
    import time

    return not_after(tls.cert) - (time.time() if now is None else now)

"""Client certificates for receivers that require mutual TLS: checking an uploaded one, issuing one from
the platform's CA (``--client-ca-cert``/``--client-ca-key``), and the TLS context of each endpoint,
cached (``ClientContexts``) so a send never rebuilds it.

Python's ``ssl`` loads a private key only from a file. The key is handed to it through an anonymous
in-memory file (``memfd_create``, Linux) that no directory lists and that is gone when closed; where
that is missing, through a temporary file holding the key encrypted under a random one-time password.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import ssl
import tempfile
from collections import OrderedDict
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from svckit.http import ClientTls
from webhookd._errors import InvalidRequest
from webhookd._receiver_auth import ClientCertificate, ReceiverAuth

MAX_CERT_PEM = 32 * 1024  # the certificate and its intermediates
MAX_KEY_PEM = 16 * 1024
MIN_RSA_BITS = 2048
PLATFORM_DAYS = 365
CONTEXTS_KEPT = 512
_FIELD = "receiver_auth.client_certificate"


def _fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def _record(chain: list[x509.Certificate], cert_pem: str, key_pem: str, platform: bool) -> ClientCertificate:
    leaf = chain[0]
    return ClientCertificate(
        cert_pem=cert_pem,
        key_pem=key_pem,
        issued_by_platform=platform,
        fingerprint=_fingerprint(leaf),
        not_after=leaf.not_valid_after_utc,
        subject=leaf.subject.rfc4514_string()[:512],
    )


def check_uploaded(cert_pem: str, key_pem: str, now: dt.datetime) -> ClientCertificate:
    """A partner's certificate (PEM, the leaf first, intermediates after it) and its private key (PEM, not
    encrypted): they parse, the key is the certificate's, RSA keys have at least 2048 bits, the
    certificate is valid now. InvalidRequest otherwise; the message never holds the key."""
    if not cert_pem or not key_pem:
        raise InvalidRequest(
            f"{_FIELD}: both the certificate and its private key (PEM) are needed to upload one"
        )
    if len(cert_pem) > MAX_CERT_PEM or len(key_pem) > MAX_KEY_PEM:
        raise InvalidRequest(
            f"{_FIELD}: certificate at most {MAX_CERT_PEM} and key at most {MAX_KEY_PEM} bytes"
        )
    try:
        chain = x509.load_pem_x509_certificates(cert_pem.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise InvalidRequest(f"{_FIELD}.certificate_pem: not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem.encode("ascii"), password=None)
    except (ValueError, TypeError, UnicodeEncodeError):
        raise InvalidRequest(f"{_FIELD}.private_key_pem: not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise InvalidRequest(f"{_FIELD}.private_key_pem: must be an RSA or EC key")
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size < MIN_RSA_BITS:
        raise InvalidRequest(f"{_FIELD}.private_key_pem: an RSA key needs at least {MIN_RSA_BITS} bits")
    leaf = chain[0]
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
        raise InvalidRequest(f"{_FIELD}.private_key_pem: is not the key of the certificate")
    if leaf.not_valid_after_utc <= now:
        raise InvalidRequest(f"{_FIELD}.certificate_pem: expired at {leaf.not_valid_after_utc.isoformat()}")
    if leaf.not_valid_before_utc > now + dt.timedelta(minutes=5):
        raise InvalidRequest(
            f"{_FIELD}.certificate_pem: not valid before {leaf.not_valid_before_utc.isoformat()}"
        )
    return _record(chain, cert_pem, key_pem, platform=False)


@dataclass(frozen=True)
class PlatformCa:
    """The operator's CA for receivers' client certificates: the certificate receivers trust, its key."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def from_files(cls, cert: str, key: str) -> PlatformCa:
        with open(cert, "rb") as c, open(key, "rb") as k:
            ca = cls(c.read(), k.read())
        ca.issue("check", dt.datetime.now(dt.UTC))  # a wrong pair fails at start, not at registration
        return ca

    def issue(self, account_id: str, now: dt.datetime) -> ClientCertificate:
        """A client certificate for the account: CN=<account id>, client authentication only, EC P-256,
        valid ``PLATFORM_DAYS`` days. Receivers trust the CA and check the CN."""
        ca_cert = x509.load_pem_x509_certificate(self.cert_pem)
        ca_key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ValueError("the client CA key must be an EC or RSA key")
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, account_id)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(min(now + dt.timedelta(days=PLATFORM_DAYS), ca_cert.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode("ascii")
        return _record([cert], cert_pem, key_pem, platform=True)


def _load_chain(context: ssl.SSLContext, cert: ClientCertificate) -> None:
    """``load_cert_chain`` from memory (module doc)."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        fd = memfd("webhookd-client-cert", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, (cert.cert_pem.strip() + "\n" + cert.key_pem.strip() + "\n").encode("ascii"))
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    password = secrets.token_bytes(32)
    key = serialization.load_pem_private_key(cert.key_pem.encode("ascii"), password=None)
    sealed = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    with tempfile.NamedTemporaryFile(suffix=".pem") as f:
        f.write(cert.cert_pem.strip().encode("ascii") + b"\n" + sealed)
        f.flush()
        context.load_cert_chain(f.name, password=password)


class ClientContexts:
    """The TLS context of each endpoint with a client certificate, the ``CONTEXTS_KEPT`` most recently
    used kept; a new certificate on an endpoint (another fingerprint) is another context and another
    pool of connections (``svckit.http.ClientTls``)."""

    def __init__(self, ca_bundle: str | None = None, kept: int = CONTEXTS_KEPT) -> None:
        self.ca_bundle = ca_bundle
        self.kept = kept
        self._contexts: OrderedDict[tuple[str, str], ClientTls] = OrderedDict()
        self.built = 0

    def get(self, auth: ReceiverAuth) -> ClientTls | None:
        cert = auth.mtls
        if cert is None:
            return None
        key = (auth.endpoint_id, cert.fingerprint)
        found = self._contexts.get(key)
        if found is not None:
            self._contexts.move_to_end(key)
            return found
        context = ssl.create_default_context(cafile=self.ca_bundle)
        _load_chain(context, cert)
        self.built += 1
        made = self._contexts[key] = ClientTls(context, f"{auth.endpoint_id}:{cert.fingerprint}")
        while len(self._contexts) > self.kept:
            self._contexts.popitem(last=False)
        return made

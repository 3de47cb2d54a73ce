"""A development CA and one certificate per service, for ``svcctl certs init`` and ``scripts/run``.

Production brings its own CA and files (``--tls-ca``, ``--tls-cert``, ``--tls-key``). Each certificate's
common name is the identity the allow list knows (``svckit.peers``); its DNS names are the identity (when
it is a host name, so clients can verify a server by service name) and localhost, plus the loopback
addresses. EC P-256 keys: quick to make and small.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import pathlib
import re

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from svckit.secretbox import write_private

# Every process of a development stack: the services, the operators' CLI and the portal.
IDENTITIES = ("authsvc", "webhookd", "edge", "svcctl", "portal")
CA_DAYS = 3650
LEAF_DAYS = 825
_HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def stem(identity: str) -> str:
    """File name stem of an identity's certificate: ``product:hotels`` -> ``product-hotels``."""
    return identity.replace(":", "-")


def files(directory: pathlib.Path, identity: str) -> tuple[str, str, str]:
    """(CA certificate, certificate, key) paths of ``identity`` in a directory ``init_dir`` made."""
    d = directory
    return str(d / "ca.pem"), str(d / f"{stem(identity)}.pem"), str(d / f"{stem(identity)}.key")


def flags(directory: pathlib.Path, identity: str) -> list[str]:
    """``--tls-ca``, ``--tls-cert`` and ``--tls-key`` of a process holding ``identity``'s certificate."""
    ca, cert, key = files(directory, identity)
    return ["--tls-ca", ca, "--tls-cert", cert, "--tls-key", key]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(common_name: str = "travel development CA") -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, private key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def issue(ca_cert_pem: bytes, ca_key_pem: bytes, identity: str) -> tuple[bytes, bytes]:
    """A certificate for ``identity`` (client and server use), signed by the CA: (cert PEM, key PEM)."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    dns = [identity] if _HOSTNAME.match(identity) else []
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in [*dns, "localhost"]]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")]
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(identity))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _write(path: pathlib.Path, data: bytes, private: bool) -> None:
    if private:  # 0600 even over a file already there with a wider mode
        write_private(path, data)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def init_dir(directory: pathlib.Path, identities: tuple[str, ...] = IDENTITIES) -> list[pathlib.Path]:
    """Make ``ca.pem``/``ca.key`` in ``directory`` unless present, then ``<identity>.pem``/``.key`` for
    each identity that has none. Returns the files written (nothing when all exist)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    written: list[pathlib.Path] = []
    ca_cert, ca_key = directory / "ca.pem", directory / "ca.key"
    if not (ca_cert.exists() and ca_key.exists()):
        cert_pem, key_pem = make_ca()
        _write(ca_key, key_pem, private=True)
        _write(ca_cert, cert_pem, private=False)
        written += [ca_cert, ca_key]
    for identity in identities:
        cert, key = directory / f"{stem(identity)}.pem", directory / f"{stem(identity)}.key"
        if cert.exists() and key.exists() and ca_cert not in written:
            continue
        cert_pem, key_pem = issue(ca_cert.read_bytes(), ca_key.read_bytes(), identity)
        _write(key, key_pem, private=True)
        _write(cert, cert_pem, private=False)
        written += [cert, key]
    return written

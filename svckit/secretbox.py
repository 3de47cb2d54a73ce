"""Sealing values at rest with AES-256-GCM (the ``cryptography`` package), for every service that must
keep a secret it cannot hash: webhookd's signing secrets, the edge's stored idempotent responses.

``SecretBox(key).seal(text, context)`` uses a fresh 96-bit nonce and ``context`` (what the value belongs
to, e.g. a row id) as associated data, so a sealed value copied onto another row does not open. It is
stored as ``enc1:<base64url(nonce + ciphertext)>``. ``open`` passes unsealed values through, so data
written without a key keeps working. Without a key, ``seal`` stores plain text: development only.
A service subclasses ``SecretBox`` to word ``key_missing``/``key_wrong`` for its own flags.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from svckit.errors import ServiceError

PREFIX = "enc1:"
KEY_BYTES = 32
NONCE_BYTES = 12


class SealingKeyError(ServiceError):
    """The sealing key is missing, malformed or not the one a stored value was sealed with."""

    type = "internal_error"


def new_key() -> str:
    """A new sealing key as the services' key files hold it (base64url of 32 random bytes)."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode("ascii")


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a secret file readable by its owner only (0600), whatever the umask and whatever mode a file
    already there had: a key is never readable by others, not even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(data)
    finally:
        if fd >= 0:
            os.close(fd)


def write_new_key(path: str | os.PathLike[str]) -> None:
    """A new sealing key in ``path`` (0600), as ``new_key`` makes it."""
    write_private(path, (new_key() + "\n").encode("ascii"))


def parse_key(text: str, error: type[ServiceError] = SealingKeyError) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text.strip().encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise error("the secrets key is not base64url") from None
    if len(key) != KEY_BYTES:
        raise error(f"the secrets key must be {KEY_BYTES} bytes (base64url), not {len(key)}")
    return key


def key_from(
    path: str, env_text: str, flag: str, error: type[ServiceError] = SealingKeyError
) -> bytes | None:
    """The sealing key from the file ``path`` (the ``flag`` option) or else from the environment variable's
    text; None when neither gives one."""
    text = env_text
    if path:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as exc:
            raise error(f"{flag}: {exc.strerror}: {path}") from None
    if not text.strip():
        return None
    return parse_key(text, error)


class SecretBox:
    def __init__(self, key: bytes | None = None) -> None:
        self._aead = AESGCM(key) if key is not None else None

    @property
    def sealing(self) -> bool:
        return self._aead is not None

    @staticmethod
    def is_sealed(stored: str) -> bool:
        return stored.startswith(PREFIX)

    def seal(self, text: str, context: str) -> str:
        if self._aead is None:
            return text
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, text.encode("utf-8"), context.encode("utf-8"))
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, stored: str, context: str) -> str:
        if not stored.startswith(PREFIX):
            return stored
        if self._aead is None:
            raise self.key_missing()
        try:
            raw = base64.urlsafe_b64decode(stored[len(PREFIX) :].encode("ascii"))
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode("utf-8")).decode(
                "utf-8"
            )
        except (InvalidTag, binascii.Error, ValueError):
            raise self.key_wrong(context) from None

    def key_missing(self) -> ServiceError:
        return SealingKeyError("a stored value is sealed and no key to open it is configured")

    def key_wrong(self, context: str) -> ServiceError:
        return SealingKeyError(f"the value sealed for {context} does not open with this key")

"""Signing secrets at rest: webhookd must sign with them, so it stores them, but never in the clear when a
key is configured (like Svix's ``encryption_key``).

``SecretBox(key).seal(text, row_id)`` is AES-256-GCM with a fresh 96-bit nonce and the row's id as
associated data (a sealed value copied onto another endpoint's row does not open), stored as
``enc1:<base64url(nonce + ciphertext)>``. ``open`` passes unsealed values through, so a database written
without a key keeps working and is sealed row by row (``SqlRepository.seal_secrets``) once a key is set.
Without a key, ``seal`` stores plain text: development only.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from webhookd._errors import SecretsKeyError

PREFIX = "enc1:"
KEY_BYTES = 32


def new_key() -> str:
    """A new secrets key, as ``--secrets-key`` takes it (base64url of 32 random bytes)."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode("ascii")


def parse_key(text: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text.strip().encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise SecretsKeyError("the secrets key is not base64url") from None
    if len(key) != KEY_BYTES:
        raise SecretsKeyError(f"the secrets key must be {KEY_BYTES} bytes (base64url), not {len(key)}")
    return key


class SecretBox:
    def __init__(self, key: bytes | None = None) -> None:
        self._aead = AESGCM(key) if key is not None else None

    @property
    def sealing(self) -> bool:
        return self._aead is not None

    def seal(self, text: str, row_id: str) -> str:
        if self._aead is None:
            return text
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, text.encode("utf-8"), row_id.encode("utf-8"))
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, stored: str, row_id: str) -> str:
        if not stored.startswith(PREFIX):
            return stored
        if self._aead is None:
            raise SecretsKeyError(
                "signing secrets in the database are sealed; start webhookd with the key that sealed them "
                "(--secrets-key-file or WEBHOOKD_SECRETS_KEY)"
            )
        raw = base64.urlsafe_b64decode(stored[len(PREFIX) :].encode("ascii"))
        try:
            return self._aead.decrypt(raw[:12], raw[12:], row_id.encode("utf-8")).decode("utf-8")
        except InvalidTag:
            raise SecretsKeyError(
                f"the signing secrets of {row_id} do not open with this secrets key"
            ) from None

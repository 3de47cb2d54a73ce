"""Sealing values at rest with AES-256-GCM (the ``cryptography`` package), for every service that must
keep a secret it cannot hash: webhookd's signing secrets, the edge's stored idempotent responses.

``SecretBox(key).seal(text, context)`` uses a fresh 96-bit nonce and ``context`` (what the value belongs
to, e.g. a row id) as associated data, so a sealed value copied onto another row does not open. It is
stored as ``enc1:<base64url(nonce + ciphertext)>``. ``open`` passes unsealed values through, so data
written without a key keeps working. Without a key, ``seal`` stores plain text: development only.
A service subclasses ``SecretBox`` to word ``key_missing``/``key_wrong`` for its own flags.

A box may hold a keyring (as Fernet's MultiFernet or a Vault keyring), newest key first: the first key
seals, every key opens. With ``key_ids`` a sealed value names its key, ``enc2:<key id>:<base64url>``, so
opening goes straight to it and a query can count the rows still under an old key (``svckit.reseal``
rewrites them under the newest); ``enc1:`` values (no key id) are tried against each key. The key id is
derived from the key (``key_id``): nothing to configure, and it tells nothing about the key.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from svckit.errors import ServiceError
from svckit.fileerrors import cannot_read

PREFIX = "enc1:"  # no key id: written by the edge, and by webhookd and authsvc before keyrings
KEYED_PREFIX = "enc2:"  # enc2:<key id>:<base64url(nonce + ciphertext)>
SEALED_PREFIXES = (PREFIX, KEYED_PREFIX)
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID_CHARS = 8


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


def key_id(key: bytes) -> str:
    """The public name of a key, stored with every value it seals: 48 bits of SHA-256 over a label and
    the key (a 256-bit random key cannot be found from it)."""
    digest = hashlib.sha256(b"svckit.secretbox key id\x00" + key).digest()
    return base64.urlsafe_b64encode(digest[:6]).decode("ascii")


def sealed_key_id(stored: str) -> str | None:
    """The key id an ``enc2:`` value names; "" for an ``enc1:`` value (no id); None when not sealed."""
    if stored.startswith(KEYED_PREFIX):
        kid, sep, _ = stored[len(KEYED_PREFIX) :].partition(":")
        return kid if sep and len(kid) == KEY_ID_CHARS else None
    return "" if stored.startswith(PREFIX) else None


def split_list(entries: str | Sequence[str]) -> list[str]:
    """A flag's comma-separated list (or a list of them, a flag given several times): the non-empty
    entries in order."""
    texts = [entries] if isinstance(entries, str) else list(entries)
    return [e.strip() for text in texts for e in text.split(",") if e.strip()]


def keys_from(
    paths: str | Sequence[str], env_text: str, flag: str, error: type[ServiceError] = SealingKeyError
) -> list[bytes]:
    """A keyring, newest key first: one key per file of ``paths`` (the ``flag`` option: comma-separated,
    or the flag repeated), or else the keys in the environment variable's text, comma-separated. Empty
    when neither gives one. A key given twice is refused (its position named, never the key)."""
    names = split_list(paths)
    texts: list[str] = []
    for path in names:
        try:
            with open(path) as f:
                texts.append(f.read())
        except OSError as exc:
            raise error(f"{flag}: {cannot_read(exc, path)}") from None
    if not names:
        texts = split_list(env_text)
    keys: list[bytes] = []
    for n, text in enumerate(texts, 1):
        if not text.strip() and len(texts) == 1:
            return []
        key = parse_key(text, error)
        if key in keys:
            raise error(f"{flag}: key {n} is the same as key {keys.index(key) + 1}")
        keys.append(key)
    return keys


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
            raise error(f"{flag}: {cannot_read(exc, path)}") from None
    if not text.strip():
        return None
    return parse_key(text, error)


class SecretBox:
    """Seals with the first key, opens with any. ``key_ids``: write ``enc2:`` values naming their key
    (webhookd, authsvc); without, ``enc1:`` (the edge, whose records live 24 h and are never re-sealed)."""

    def __init__(self, key: bytes | Sequence[bytes] | None = None, *, key_ids: bool = False) -> None:
        keys = [] if key is None else [key] if isinstance(key, bytes) else list(key)
        self._ring = {key_id(k): AESGCM(k) for k in keys}
        self._aead = AESGCM(keys[0]) if keys else None
        self.key_ids = key_ids
        self.primary_id = key_id(keys[0]) if keys else ""

    @property
    def sealing(self) -> bool:
        return self._aead is not None

    def writing(self, *, key_ids: bool) -> SecretBox:
        """The same ring, sealing with key ids or without: ``enc1:`` is what releases before keyrings
        open, for a rollback to one (``reseal --legacy-format``)."""
        other = copy.copy(self)
        other.key_ids = key_ids
        return other

    @property
    def ring_ids(self) -> list[str]:
        """The key ids of the ring, newest (the sealing key) first."""
        return list(self._ring)

    def current_prefix(self) -> str:
        """What every value this box seals starts with: ``enc2:<newest key id>:`` (or ``enc1:``)."""
        return f"{KEYED_PREFIX}{self.primary_id}:" if self.key_ids else PREFIX

    def is_current(self, stored: str) -> bool:
        """Sealed as this box seals now (with key ids: under the newest key); no re-seal needed."""
        return self.sealing and stored.startswith(self.current_prefix())

    def seal(self, text: str, context: str) -> str:
        if self._aead is None:
            return text
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, text.encode("utf-8"), context.encode("utf-8"))
        return self.current_prefix() + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def reseal(self, stored: str, context: str) -> str:
        """``stored`` (sealed under any key of the ring, or plain) sealed again under the newest key."""
        return self.seal(self.open(stored, context), context)

    def open(self, stored: str, context: str) -> str:
        kid = sealed_key_id(stored)
        if kid is None and not stored.startswith(KEYED_PREFIX):
            return stored
        if self._aead is None:
            raise self.key_missing()
        if kid is None or (kid and kid not in self._ring):
            raise self.key_wrong(context)
        body = stored[len(KEYED_PREFIX) + len(kid) + 1 :] if kid else stored[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body.encode("ascii"))
        except (binascii.Error, ValueError):
            raise self.key_wrong(context) from None
        nonce, sealed, aad = raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode("utf-8")
        # An enc1 value names no key: each is tried, newest first (a failing GCM tag costs microseconds).
        for aead in [self._ring[kid]] if kid else self._ring.values():
            try:
                return aead.decrypt(nonce, sealed, aad).decode("utf-8")
            except (InvalidTag, ValueError):
                continue
        raise self.key_wrong(context)

    def key_missing(self) -> ServiceError:
        return SealingKeyError("a stored value is sealed and no key to open it is configured")

    def key_wrong(self, context: str) -> ServiceError:
        return SealingKeyError(f"the value sealed for {context} does not open with this key")

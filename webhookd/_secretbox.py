"""Signing secrets at rest: webhookd must sign with them, so it stores them, but never in the clear when a
key is configured (like Svix's ``encryption_key``).

The sealing itself is ``svckit.secretbox`` (AES-256-GCM, a fresh nonce, the endpoint id as associated
data so a sealed value copied onto another endpoint's row does not open). ``open`` passes unsealed values
through, so a database written without a key keeps working and is sealed row by row
(``SqlRepository.seal_secrets``) once a key is set. Without a key, ``seal`` stores plain text: development
only. The key is a keyring (``--secrets-key-file NEW,OLD``): the first seals, every one opens, and each
sealed value names its key (``enc2:``), so ``python -m webhookd reseal`` can move every row to the newest.
This module words the errors for webhookd's flags.
"""

from __future__ import annotations

from collections.abc import Sequence

from svckit import secretbox
from svckit.secretbox import KEY_BYTES, SEALED_PREFIXES, new_key
from webhookd._errors import SecretsKeyError

__all__ = ["KEY_BYTES", "SEALED_PREFIXES", "SecretBox", "new_key", "parse_key"]


def parse_key(text: str) -> bytes:
    return secretbox.parse_key(text, SecretsKeyError)


class SecretBox(secretbox.SecretBox):
    def __init__(self, key: bytes | Sequence[bytes] | None = None, *, key_ids: bool = True) -> None:
        super().__init__(key, key_ids=key_ids)

    def key_missing(self) -> SecretsKeyError:
        return SecretsKeyError(
            "signing secrets in the database are sealed; start webhookd with the key that sealed them "
            "(--secrets-key-file or WEBHOOKD_SECRETS_KEY; during a rotation both keys, newest first)"
        )

    def key_wrong(self, context: str) -> SecretsKeyError:
        return SecretsKeyError(
            f"the signing secrets of {context} do not open with this secrets key (a rotation: give the old "
            "key after the new one until `python -m webhookd reseal` has run)"
        )

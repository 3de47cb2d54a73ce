"""Sealing signing secrets at rest (AES-256-GCM, the row id as associated data)."""

from __future__ import annotations

import base64

import pytest

from webhookd._errors import SecretsKeyError
from webhookd._secretbox import SEALED_PREFIXES, SecretBox, new_key, parse_key

SECRETS = '[{"s": "whsec_' + "A" * 44 + '", "exp": null}]'


def test_sealed_value_hides_the_secret_and_opens_again() -> None:
    box = SecretBox(parse_key(new_key()))
    sealed = box.seal(SECRETS, "we_1")
    assert sealed.startswith(SEALED_PREFIXES) and "whsec_" not in sealed
    assert sealed != box.seal(SECRETS, "we_1")  # a fresh nonce every time
    assert box.open(sealed, "we_1") == SECRETS


@pytest.mark.parametrize(
    ("opener", "row", "message"),
    [
        (SecretBox(parse_key(new_key())), "we_1", "do not open with this secrets key"),
        (None, "we_2", "do not open"),  # the right key, another row: copied ciphertext does not open
        (SecretBox(), "we_1", "start webhookd with the key that sealed them"),
    ],
    ids=["wrong key", "other row", "no key"],
)
def test_sealed_value_does_not_open_otherwise(opener: SecretBox | None, row: str, message: str) -> None:
    box = SecretBox(parse_key(new_key()))
    sealed = box.seal(SECRETS, "we_1")
    with pytest.raises(SecretsKeyError) as err:
        (opener or box).open(sealed, row)
    assert message in err.value.message and "whsec_" not in err.value.message


def test_without_a_key_values_stay_plain_and_plain_values_open_with_any_box() -> None:
    assert SecretBox().seal(SECRETS, "we_1") == SECRETS
    assert SecretBox(parse_key(new_key())).open(SECRETS, "we_1") == SECRETS


TOO_LONG = base64.urlsafe_b64encode(b"k" * 64).decode()


@pytest.mark.parametrize("text", ["", "not base64!", "c2hvcnQ=", TOO_LONG])
def test_malformed_keys_are_refused(text: str) -> None:
    with pytest.raises(SecretsKeyError):
        parse_key(text)


def test_new_keys_parse_and_differ() -> None:
    a, b = new_key(), new_key()
    assert a != b and len(parse_key(a)) == 32 and len(parse_key(b + "\n")) == 32

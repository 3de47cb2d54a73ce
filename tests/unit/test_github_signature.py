"""GitHub's published secret-scanning test vector verifies against GitHub's published key; one changed byte
of the body or of the signature does not (edge.githubkeys)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from edge.githubkeys import KeyList, parse_key_list, signature_valid

# GitHub's documented example (its secret scanning partner program page): the request body, headers and
# the public key they name (base64 SPKI DER).
BODY = b'[{"token":"some_token","type":"some_type","url":"some_url","source":"some_source"}]'
IDENTIFIER = "f9525bf080f75b3506ca1ead061add62b8633a346606dc5fe544e29231c6ee0d"
SIGNATURE = "MEUCIFLZzeK++IhS+y276SRk2Pe5LfDrfvTXu6iwKKcFGCrvAiEAhHN2kDOhy2I6eGkOFmxNkOJ+L2y8oQ9A2T9GGJo6WJY="
PUBLIC_KEY_SPKI = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEsz9ugWDj5jK5ELBK42ynytbo38gPHzZFI03Exwz8Lh/tCfL3YxwMdLjB+bMz"
    "nsanlhK0RwcGP3IDb34kQDIo3Q=="
)


def _pem(spki_b64: str) -> str:
    lines = [spki_b64[i : i + 64] for i in range(0, len(spki_b64), 64)]
    return "-----BEGIN PUBLIC KEY-----\n" + "\n".join(lines) + "\n-----END PUBLIC KEY-----\n"


def _keys() -> dict[str, ec.EllipticCurvePublicKey]:
    doc = {"public_keys": [{"key_identifier": IDENTIFIER, "key": _pem(PUBLIC_KEY_SPKI), "is_current": True}]}
    return parse_key_list(json.dumps(doc).encode())


def test_the_documented_vector_verifies() -> None:
    assert signature_valid(BODY, SIGNATURE, _keys()[IDENTIFIER])


def test_bare_base64_spki_keys_are_read_too() -> None:
    doc = {"public_keys": [{"key_identifier": "k", "key": PUBLIC_KEY_SPKI, "is_current": True}]}
    assert signature_valid(BODY, SIGNATURE, parse_key_list(json.dumps(doc).encode())["k"])


@pytest.mark.parametrize("index", [0, 1, len(BODY) // 2, len(BODY) - 1])
def test_one_changed_body_byte_fails(index: int) -> None:
    changed = bytearray(BODY)
    changed[index] ^= 0x01
    assert not signature_valid(bytes(changed), SIGNATURE, _keys()[IDENTIFIER])


@pytest.mark.parametrize("index", [8, 20, 40, 60])
def test_one_changed_signature_byte_fails(index: int) -> None:
    raw = bytearray(base64.b64decode(SIGNATURE))
    raw[index] ^= 0x01
    assert not signature_valid(BODY, base64.b64encode(bytes(raw)).decode(), _keys()[IDENTIFIER])


@pytest.mark.parametrize("signature", ["", "not base64!", "A" * 600, base64.b64encode(b"short").decode()])
def test_malformed_signatures_fail(signature: str) -> None:
    assert not signature_valid(BODY, signature, _keys()[IDENTIFIER])


def test_another_key_fails() -> None:
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    assert not signature_valid(BODY, SIGNATURE, other)


def test_key_lists_skip_what_is_not_a_p256_key() -> None:
    rsa_like = base64.b64encode(b"nonsense").decode()
    p384 = (
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    doc = {
        "public_keys": [
            {"key_identifier": "a", "key": rsa_like},
            {"key_identifier": "b", "key": p384},
            {"key_identifier": 3, "key": PUBLIC_KEY_SPKI},
            "x",
        ]
    }
    assert parse_key_list(json.dumps(doc).encode()) == {}


@pytest.mark.parametrize("document", [b"", b"[]", b'{"public_keys": 3}', b"{"])
def test_what_is_not_a_key_list_is_refused(document: bytes) -> None:
    with pytest.raises(ValueError):
        parse_key_list(document)


def _write(path: Path, *identifiers: str) -> None:
    doc = {"public_keys": [{"key_identifier": i, "key": _pem(PUBLIC_KEY_SPKI)} for i in identifiers]}
    path.write_text(json.dumps(doc))


async def test_the_key_list_is_read_again_for_a_new_identifier_at_most_once_per_floor(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    _write(keys, "a")
    held = KeyList(str(keys), refetch_floor=3600)
    assert await held.key("a") is not None
    _write(keys, "a", "b")  # GitHub rotated its keys
    assert await held.key("b") is None  # a made-up identifier cannot make it read again and again
    fresh = KeyList(str(keys), refetch_floor=0)
    assert await fresh.key("a") is not None
    _write(keys, "b")
    assert await fresh.key("b") is not None


async def test_an_unreadable_key_list_verifies_nothing(tmp_path: Path) -> None:
    assert await KeyList(str(tmp_path / "missing.json")).key("a") is None
    (tmp_path / "bad.json").write_text("not json")
    assert await KeyList(str(tmp_path / "bad.json")).key("a") is None

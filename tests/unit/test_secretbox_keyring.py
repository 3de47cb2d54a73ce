"""The sealing keyring (svckit.secretbox), by table: which box opens which stored value, what a box
re-seals, the key id a value names, and keyrings read from files and the environment."""

from __future__ import annotations

import pathlib

import pytest

from svckit.secretbox import (
    KEYED_PREFIX,
    PREFIX,
    SealingKeyError,
    SecretBox,
    key_id,
    keys_from,
    new_key,
    parse_key,
    sealed_key_id,
    split_list,
)

A, B, C = (parse_key(new_key()) for _ in range(3))
TEXT = "JBSWY3DPEHPK3PXP"

# Stored values, each made once: (name, the box that sealed it or None for plain text).
SEALERS: dict[str, SecretBox | None] = {
    "plain": None,
    "enc1 under A": SecretBox(A),
    "enc2 under A": SecretBox(A, key_ids=True),
    "enc2 under B": SecretBox(B, key_ids=True),
    "enc2 under [B, A]": SecretBox([B, A], key_ids=True),
}
STORED = {name: (box.seal(TEXT, "row_1") if box else TEXT) for name, box in SEALERS.items()}

# (stored value, opening keyring) -> opens? ("no key": SealingKeyError for want of a key)
OPENS = [
    ("plain", [], True),
    ("plain", [A], True),
    ("enc1 under A", [A], True),
    ("enc1 under A", [B, A], True),  # no key id: each key is tried
    ("enc1 under A", [B], False),
    ("enc1 under A", [], False),
    ("enc2 under A", [A], True),
    ("enc2 under A", [B, A], True),  # the rotation's middle: both open
    ("enc2 under A", [B], False),  # the old key removed too early
    ("enc2 under A", [C, B], False),
    ("enc2 under B", [B, A], True),
    ("enc2 under B", [A], False),  # a process not yet given the new key
    ("enc2 under [B, A]", [B], True),  # the first key seals
    ("enc2 under [B, A]", [A], False),
]


@pytest.mark.parametrize(("stored", "ring", "opens"), OPENS)
def test_which_ring_opens_which_value(stored: str, ring: list[bytes], opens: bool) -> None:
    box = SecretBox(ring, key_ids=True)
    if opens:
        assert box.open(STORED[stored], "row_1") == TEXT
    else:
        with pytest.raises(SealingKeyError) as err:
            box.open(STORED[stored], "row_1")
        assert TEXT not in err.value.message


@pytest.mark.parametrize("stored", [s for s in STORED if s != "plain"])
def test_a_value_opens_only_on_its_own_row(stored: str) -> None:
    with pytest.raises(SealingKeyError):
        SecretBox([B, A], key_ids=True).open(STORED[stored], "row_2")


# (stored value, the box's keyring) -> already current (no re-seal)?
CURRENT = [
    ("plain", [B, A], False),
    ("enc1 under A", [A], False),  # names no key: re-sealed to name it
    ("enc2 under A", [A], True),
    ("enc2 under A", [B, A], False),
    ("enc2 under B", [B, A], True),
    ("enc2 under [B, A]", [B], True),
    ("plain", [], False),  # no key: nothing is current, nothing is sealed
]


@pytest.mark.parametrize(("stored", "ring", "current"), CURRENT)
def test_what_a_ring_reseals(stored: str, ring: list[bytes], current: bool) -> None:
    box = SecretBox(ring, key_ids=True)
    assert box.is_current(STORED[stored]) is current
    if ring:
        again = box.reseal(STORED[stored], "row_1")
        assert again.startswith(f"{KEYED_PREFIX}{key_id(ring[0])}:") and box.is_current(again)
        assert SecretBox(ring[0], key_ids=True).open(again, "row_1") == TEXT  # the newest key alone opens it


def test_without_key_ids_values_are_enc1_as_before() -> None:
    box = SecretBox([B, A])
    sealed = box.seal(TEXT, "row_1")
    assert sealed.startswith(PREFIX) and sealed_key_id(sealed) == ""
    assert SecretBox(B).open(sealed, "row_1") == TEXT
    legacy = SecretBox([B, A], key_ids=True).writing(key_ids=False)
    assert legacy.reseal(STORED["enc2 under A"], "row_1").startswith(PREFIX)


@pytest.mark.parametrize(
    ("stored", "kid"),
    [
        ("plain", None),
        ("enc1 under A", ""),
        ("enc2 under A", key_id(A)),
        ("enc2 under [B, A]", key_id(B)),
    ],
    ids=["plain", "enc1 under A", "enc2 under A", "enc2 under [B, A]"],  # the keys are random: stable ids
)
def test_the_key_id_a_value_names(stored: str, kid: str | None) -> None:
    assert sealed_key_id(STORED[stored]) == kid


@pytest.mark.parametrize("text", ["enc2:", "enc2:short:AAAA", "enc2:" + "x" * 8 + "AAAA"])
def test_malformed_keyed_values_do_not_open(text: str) -> None:
    with pytest.raises(SealingKeyError):
        SecretBox(A, key_ids=True).open(text, "row_1")


def test_key_ids_are_stable_short_and_differ() -> None:
    assert key_id(A) == key_id(bytes(A)) and len(key_id(A)) == 8
    assert len({key_id(A), key_id(B), key_id(C)}) == 3
    assert SecretBox([B, A]).ring_ids == [key_id(B), key_id(A)]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [("", []), ("a", ["a"]), ("a, b", ["a", "b"]), (["a,b", "c"], ["a", "b", "c"]), ([" ", "a,,"], ["a"])],
)
def test_split_list(entries: str | list[str], expected: list[str]) -> None:
    assert split_list(entries) == expected


def _files(tmp_path: pathlib.Path, *texts: str) -> list[str]:
    paths = []
    for n, text in enumerate(texts):
        path = tmp_path / f"k{n}"
        path.write_text(text + "\n")
        paths.append(str(path))
    return paths


def test_keyring_from_files_newest_first(tmp_path: pathlib.Path) -> None:
    new, old = new_key(), new_key()
    paths = _files(tmp_path, new, old)
    assert keys_from(",".join(paths), "", "--k") == [parse_key(new), parse_key(old)]
    assert keys_from(paths, new_key(), "--k") == [parse_key(new), parse_key(old)]  # files win
    assert keys_from([], f"{new},{old}", "--k") == [parse_key(new), parse_key(old)]  # else the environment
    assert keys_from([], "", "--k") == []
    assert keys_from(_files(tmp_path, ""), "", "--k") == []


@pytest.mark.parametrize(
    ("texts", "env", "message"),
    [
        (["same", "same"], "", "key 2 is the same as key 1"),
        (["not base64!"], "", "not base64url"),
        ([], "c2hvcnQ=", "must be 32 bytes"),
    ],
)
def test_bad_keyrings_are_refused_without_the_key(
    tmp_path: pathlib.Path, texts: list[str], env: str, message: str
) -> None:
    same = new_key()
    paths = _files(tmp_path, *(same if t == "same" else t for t in texts))
    with pytest.raises(SealingKeyError) as err:
        keys_from(paths, env, "--k")
    assert message in err.value.message and same not in err.value.message


def test_a_missing_file_is_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SealingKeyError) as err:
        keys_from(str(tmp_path / "nope"), "", "--secrets-key-file")
    assert "--secrets-key-file" in err.value.message and "nope" in err.value.message

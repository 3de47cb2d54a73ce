"""authsvc._known_keys by table: which key hashes are proven absent without a read, and when nothing is."""

from __future__ import annotations

import pathlib

import pytest

from authsvc._known_keys import PREFIX, KnownKeys, SoleWriter, proven_unknown

STORED = "a" * 64
SAME_PREFIX = "a" * PREFIX + "b" * (64 - PREFIX)
OTHER = "c" * 64


@pytest.mark.parametrize(
    ("prefixes", "secret_hash", "unknown"),
    [
        (None, OTHER, False),  # nothing kept (PostgreSQL, not loaded, too many keys): every key is read
        (set(), OTHER, True),  # an empty table: every key is unknown
        ({STORED[:PREFIX]}, STORED, False),
        ({STORED[:PREFIX]}, SAME_PREFIX, False),  # a shared prefix is read, never refused on the prefix
        ({STORED[:PREFIX]}, OTHER, True),
    ],
)
def test_proven_unknown(prefixes: set[str] | None, secret_hash: str, unknown: bool) -> None:
    assert proven_unknown(prefixes, secret_hash) is unknown


def test_nothing_is_proven_before_the_table_is_read() -> None:
    known = KnownKeys()
    known.add(STORED)  # not loaded: no set to add to
    assert not known.unknown(OTHER) and len(known) == 0


def test_a_key_added_is_known_and_nothing_is_removed() -> None:
    known = KnownKeys()
    known.load([STORED])
    assert known.unknown(OTHER)
    known.add(OTHER)
    assert not known.unknown(OTHER) and not known.unknown(STORED) and len(known) == 2


@pytest.mark.parametrize(("loaded", "added", "kept"), [(2, 0, True), (3, 0, False), (2, 1, False)])
def test_past_the_bound_nothing_is_proven(loaded: int, added: int, kept: bool) -> None:
    known = KnownKeys(max_known=2)
    known.load([f"{i:016x}" + "0" * 48 for i in range(loaded)])
    for i in range(added):
        known.add(f"{100 + i:016x}" + "0" * 48)
    assert known.unknown(OTHER) is kept


def test_a_process_is_alone_on_its_file_until_another_starts(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "a.db-authsvc-processes")
    first = SoleWriter(path)
    assert first() and first()
    second = SoleWriter(path)  # the first still runs: the second is never alone
    assert not second()
    second.close()
    assert not first()  # it started (and may have added keys) after the first read its table
    first.close()
    third = SoleWriter(path)  # nobody runs any more
    assert third()
    third.close()
    third.close()  # a server stopped twice
    assert not third()


def test_a_set_is_dropped_for_good_once_not_alone() -> None:
    alone = [True]
    known = KnownKeys(alone=lambda: alone[0])
    known.load([STORED])
    assert known.unknown(OTHER)
    alone[0] = False
    assert not known.unknown(OTHER)
    alone[0] = True
    assert not known.unknown(OTHER) and len(known) == 0

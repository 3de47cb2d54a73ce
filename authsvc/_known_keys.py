"""The keys this process can prove it does not have, without reading the database.

A made-up key with a valid checksum costs authsvc a cache miss and an indexed read (tens of times the
CPU of the answer itself, and on SQLite one more read in the queue a partner's first use of a real key
waits in). So while this process is the only authsvc on its SQLite file, it keeps the first ``PREFIX``
hex digits of the SHA-256 of every key secret in the table (64 bits each, a few tens of bytes a key)
and answers a secret whose digest's prefix is not among them as unknown at once.

Correct because the set is never smaller than the table: it is read whole before the server takes a
call, and a new key's prefix is added before its row is written (a write that then fails leaves a
prefix that only costs a read). Nothing is ever removed: a revoked or expired key, or a prefix shared
with another key, is read as before. Another process adding keys would make the set too small, so
every authsvc on a SQLite file announces itself in a file beside it (``SoleWriter``): a process that
finds another running when it starts keeps no set, and one that sees a later start drops its set for
good before answering. On PostgreSQL several processes share the table and learn of each other's keys
only through a notification that may come after the key's first use, so there every key is read
(``proven_unknown`` with no set). Past ``MAX_KNOWN`` keys the set is dropped for good too (the bound is
on memory; the answer is the same without it).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterable

PREFIX = 16
MAX_KNOWN = 1_000_000
# Beside a SQLite file: one byte appended by each authsvc start, and a shared lock held by each running one.
SUFFIX = "-authsvc-processes"


def proven_unknown(prefixes: frozenset[str] | set[str] | None, secret_hash: str) -> bool:
    """Is the key of ``secret_hash`` (its hex SHA-256) surely absent from the table? Only when the set of
    every stored key's prefix is kept (``prefixes`` not None) and lacks this one."""
    return prefixes is not None and secret_hash[:PREFIX] not in prefixes


class SoleWriter:
    """Has this process been the only authsvc on its SQLite file since it started? Each process appends a
    byte to the file ``path`` and holds a shared lock on it while it runs; one that can take the lock
    exclusively at start was alone then, and stays alone while the file keeps the size it left. Both
    are decided on the kernel's state, so a process killed -9 is no longer counted, and one that started
    and exited since still is."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except BlockingIOError:
            alone = False
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # a starting one waits for the first to finish its own start
        os.write(self._fd, b".")
        self._size: int | None = os.fstat(self._fd).st_size if alone else None
        if alone:
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def __call__(self) -> bool:
        if self._size is not None and os.fstat(self._fd).st_size != self._size:
            self._size = None  # another one started: never alone again
        return self._size is not None

    def close(self) -> None:
        """Idempotent (a server may be stopped twice)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._size = None


class KnownKeys:
    """The prefixes of this process's key table, or None (not loaded, or not provable here: every key is
    read). ``alone``: asked before a key is answered unknown; False once drops the set for good."""

    def __init__(self, max_known: int = MAX_KNOWN, alone: Callable[[], bool] = lambda: True) -> None:
        self.max_known = max_known
        self.alone = alone
        self.prefixes: set[str] | None = None

    def load(self, secret_hashes: Iterable[str]) -> None:
        """Every stored key's hash, read before the first call is served."""
        prefixes = {h[:PREFIX] for h in secret_hashes}
        self.prefixes = prefixes if len(prefixes) <= self.max_known else None

    def add(self, secret_hash: str) -> None:
        """A key about to be written: known from now on (call before the insert)."""
        if self.prefixes is None:
            return
        self.prefixes.add(secret_hash[:PREFIX])
        if len(self.prefixes) > self.max_known:
            self.prefixes = None

    def unknown(self, secret_hash: str) -> bool:
        if not proven_unknown(self.prefixes, secret_hash):
            return False
        if not self.alone():
            self.prefixes = None
            return False
        return True

    def __len__(self) -> int:
        return 0 if self.prefixes is None else len(self.prefixes)

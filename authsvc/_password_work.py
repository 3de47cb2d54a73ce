"""Password hashing (argon2id) on its own bounded workers, with load shedding.

argon2id is deliberately expensive (64 MiB and several passes per check). It runs here, on a small
thread pool of its own: never on the event loop that answers Authorize, and never on the loop's default
executor (``asyncio.to_thread``), which the servicer's other work, DNS look-ups and libraries share.
At most ``workers`` hashes run at once and at most ``max_waiting`` more wait; a check past that is
refused at once (``Overloaded``), before any hash is computed (rules.hashing_admitted). A sign-in is
also held to the process's global budget of sign-in checks (authsvc._signin_budget), whatever its
source. The admission count and the budget live on the event loop (one thread), so reading and bumping
them is atomic.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from prometheus_client import Counter

from authsvc import _identity_rules as rules
from authsvc import _signin_budget as budget

T = TypeVar("T")

# Half the cores (at least one) for hashing: the rest stay with the event loop and the database.
DEFAULT_WORKERS = max(1, (os.cpu_count() or 2) // 2)
# Sign-ins allowed to wait for a worker; at ~0.1 s a hash, about a second of queue per worker.
DEFAULT_MAX_WAITING = 8
# The hashing threads' nice value (Linux: per thread, and inherited by the lane threads argon2 starts):
# a hash then takes the CPU the event loops of this and the other processes (the edge) leave, instead of
# sharing it equally with them.
HASH_NICE = 10


def _lower_priority() -> None:
    """Each hashing worker's first act: its own nice value to HASH_NICE (where the system allows)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HASH_NICE)
    except (AttributeError, OSError):
        pass  # no per-thread priority here: the hashes run at the process's


PASSWORD_CHECKS = Counter(
    "authsvc_password_hashes_total",
    "argon2id computations by kind (verify, hash), and checks refused unhashed: shed (the queue is full) "
    "or budget (the global sign-in budget is spent)",
    ["kind"],
)
_VERIFIED = PASSWORD_CHECKS.labels("verify")
_HASHED = PASSWORD_CHECKS.labels("hash")
_SHED = PASSWORD_CHECKS.labels("shed")
_OVER_BUDGET = PASSWORD_CHECKS.labels("budget")


class Overloaded(Exception):
    """The check was refused without being computed: the hashing queue is full, or (a sign-in) the
    global sign-in budget is spent for ``retry_after`` seconds (None: the queue's, no estimate)."""

    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__()
        self.retry_after = retry_after


class PasswordWork:
    def __init__(
        self,
        *,
        workers: int | None = None,
        max_waiting: int | None = None,
        sign_in_rate: float | None = None,
        sign_in_burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workers = max(1, DEFAULT_WORKERS if workers is None else workers)
        self.max_waiting = max(0, DEFAULT_MAX_WAITING if max_waiting is None else max_waiting)
        self.sign_in_rate = budget.SIGN_IN_RATE if sign_in_rate is None else sign_in_rate
        self.sign_in_burst = budget.SIGN_IN_BURST if sign_in_burst is None else sign_in_burst
        self.clock = clock
        self._sign_in_tat: float | None = None
        self.hasher = PasswordHasher()  # argon2id, RFC 9106 low-memory profile defaults
        self._pool = ThreadPoolExecutor(
            max_workers=self.workers, thread_name_prefix="argon2", initializer=_lower_priority
        )
        self.in_flight = 0
        # Verified against when the e-mail is unknown, so both paths cost the same.
        self.dummy_hash = self.hasher.hash(os.urandom(16).hex())

    @contextlib.asynccontextmanager
    async def admitted(self, *, sign_in: bool = False) -> AsyncIterator[None]:
        """A place in the hashing queue for the block, or Overloaded at once when there is none; a
        ``sign_in`` also takes one of the global sign-in budget."""
        if not rules.hashing_admitted(self.in_flight, self.workers, self.max_waiting):
            _SHED.inc()
            raise Overloaded
        if sign_in:
            spent = budget.spend(self._sign_in_tat, self.clock(), self.sign_in_rate, self.sign_in_burst)
            if not spent.allowed:
                _OVER_BUDGET.inc()
                raise Overloaded(spent.retry_after)
            self._sign_in_tat = spent.tat
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def verify(self, password_hash: str, password: str) -> bool:
        """Whether ``password`` matches; call inside ``admitted()``."""
        _VERIFIED.inc()

        def check() -> bool:
            try:
                return self.hasher.verify(password_hash, password)
            except (VerificationError, InvalidHashError):
                return False

        return await self._run(check)

    async def hash(self, password: str) -> str:
        """A new argon2id hash of ``password``; call inside ``admitted()``."""
        _HASHED.inc()
        return await self._run(lambda: self.hasher.hash(password))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

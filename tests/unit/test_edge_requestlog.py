"""edge.requestlog: the buffer keeps its newest records while authsvc is down (the oldest dropped and
counted), sends them in batches when it is back, and never sends a header value or the key."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from edge.authcache import Caller
from edge.metrics import REQUEST_LOG_DROPPED
from edge.requestlog import RequestLog, success_filed
from svckit.clients import PeerUnavailable
from travel.auth.v1 import auth_pb2 as pb

CALLER = Caller("key_1", "acct_1", "sandbox", ("hotels:read",), "active", key_hint="svc_test_...Ab12")


class FakeAuth:
    def __init__(self) -> None:
        self.down = True
        self.batches: list[list[pb.RequestRecord]] = []

    async def record_requests(self, request: pb.RecordRequestsRequest, **_: Any) -> pb.RecordRequestsResponse:
        if self.down:
            raise PeerUnavailable("authsvc", "down")
        self.batches.append(list(request.records))
        return pb.RecordRequestsResponse(recorded=len(request.records))


def dropped() -> float:
    return REQUEST_LOG_DROPPED.labels("buffer_full")._value.get()  # type: ignore[no-any-return]


async def test_buffer_keeps_the_newest_while_authsvc_is_down_then_sends_in_batches() -> None:
    auth = FakeAuth()
    log = RequestLog(auth, maxlen=5, batch=2)  # type: ignore[arg-type]
    before = dropped()
    t0 = int(time.time()) - 100
    for n in range(4):
        log.record(t0 + n, CALLER, "GET", f"/v1/a/{n}", 200, "", f"req_{n:024x}")
    assert not await log.flush()
    for n in range(4, 7):
        log.record(t0 + n, CALLER, "GET", f"/v1/a/{n}", 403, "missing_scope", f"req_{n:024x}")
    assert not await log.flush()
    assert dropped() - before == 2  # 7 records, room for 5: the 2 oldest went
    auth.down = False
    assert await log.flush()
    sent = [r for batch in auth.batches for r in batch]
    assert [len(b) for b in auth.batches] == [2, 2, 1]
    assert [r.request_id for r in sent] == [f"req_{n:024x}" for n in range(2, 7)]
    last = sent[-1]
    assert (last.account_id, last.key_id, last.key_hint, last.status, last.error_type) == (
        "acct_1",
        "key_1",
        "svc_test_...Ab12",
        403,
        "missing_scope",
    )
    assert last.environment == pb.ENVIRONMENT_SANDBOX and last.occurred_at.seconds == t0 + 6
    assert not log.buffer
    assert 0 <= last.latency_ms <= 200_000


async def test_a_record_that_cannot_be_sent_does_not_block_the_rest() -> None:
    auth = FakeAuth()
    auth.down = False
    log = RequestLog(auth)  # type: ignore[arg-type]
    log.record(1.0, CALLER, "GET", "/v1/a", 200, "", "req_1")  # a latency past an int32: clamped
    log.record(time.time(), CALLER, "GET", "/v1/b", 200, "", "req_2")
    assert await log.flush()
    assert [r.request_id for r in auth.batches[0]] == ["req_1", "req_2"]
    assert auth.batches[0][0].latency_ms == 2**31 - 1


async def test_successes_are_filed_up_to_a_number_a_second() -> None:
    """Errors are always filed (by the gate); successes: the first N of each second, the count starting
    afresh each second."""
    log = RequestLog(FakeAuth(), successes_per_second=3)  # type: ignore[arg-type]
    starts = [100.0, 100.2, 100.5, 100.9, 101.0, 101.1, 101.2, 101.3, 105.7]
    accounts = ["a", "b", "c", "d", "a", "b", "c", "d", "a"]  # the accounts' shares are not reached here
    got = [log.files_success(t, acct) for t, acct in zip(starts, accounts, strict=True)]
    assert got == [True, True, True, False, True, True, True, False, True]
    off = RequestLog(FakeAuth(), successes_per_second=0)  # type: ignore[arg-type]
    assert not off.files_success(100.0, "a")


async def test_a_second_whose_successes_are_all_filed_is_known_without_asking() -> None:
    """successes_full_until (read by the gate before calling files_success) marks the end of the second
    whose quota files_success last refused: every success starting before it would be refused too."""
    log = RequestLog(FakeAuth(), successes_per_second=2)  # type: ignore[arg-type]
    assert [log.files_success(t, acct) for t, acct in ((100.1, "a"), (100.2, "b"))] == [True, True]
    assert log.successes_full_until == 0.0
    assert not log.files_success(100.3, "c")
    assert log.successes_full_until == 101.0
    assert log.files_success(101.0, "c")


# success_filed(filed this second, of them the account's, per second, one account's most) -> filed?
@pytest.mark.parametrize(
    ("case", "filed", "of_account", "expected"),
    [
        ("nothing filed yet", 0, 0, True),
        ("the account below its share", 30, 24, True),
        ("the account at its share: the rest is others'", 30, 25, False),
        ("the second's budget spent by others", 50, 0, False),
        ("the budget spent by the account itself (never: its share stops it first)", 50, 25, False),
    ],
)
def test_success_filed(case: str, filed: int, of_account: int, expected: bool) -> None:
    assert success_filed(filed, of_account, 50, 25) is expected, case


async def test_one_busy_account_leaves_anothers_successes_filed() -> None:
    """Issue 34: one partner at 100 requests a second made 9 of another's 20 successes of that second
    vanish from its log (the second's 50 filed successes were every account's). One account now files at
    most half of them; another's 20 in the same second, interleaved, are all filed."""
    log = RequestLog(FakeAuth())  # type: ignore[arg-type]
    filed = {"busy": 0, "quiet": 0}
    for n in range(120):
        t = 100.0 + n / 120
        acct = "quiet" if n % 6 == 5 else "busy"
        if log.files_success(t, acct):
            filed[acct] += 1
    assert filed == {"busy": 25, "quiet": 20}
    assert log.successes_full_until == 0.0  # the second's budget was not spent: others are still filed


async def test_errors_are_filed_up_to_a_number_per_account_a_second() -> None:
    """Each account's first N errors of each second (by their answer's time) are filed, whatever another
    account does; the rest are counted, and the count reaches the metric at the next flush."""
    log = RequestLog(FakeAuth(), errors_per_account=2)  # type: ignore[arg-type]
    cases = [
        ("acct_a", 100.0, True),
        ("acct_a", 100.4, True),
        ("acct_a", 100.9, False),  # a's third of second 100
        ("acct_b", 100.9, True),  # b has its own quota
        ("acct_a", 101.0, True),  # a new second: counts start afresh
        ("acct_b", 101.2, True),
        ("acct_b", 101.3, True),
        ("acct_b", 101.4, False),
        ("acct_a", 101.5, True),
        ("acct_a", 101.6, False),
    ]
    assert [log.files_error(account, t) for account, t, _ in cases] == [want for *_, want in cases]
    assert log.errors_skipped == 3
    skipped = REQUEST_LOG_DROPPED.labels("account_errors")
    before = skipped._value.get()
    assert await log.flush()
    assert skipped._value.get() - before == 3 and log.errors_skipped == 0
    off = RequestLog(FakeAuth(), errors_per_account=0)  # type: ignore[arg-type]
    assert not off.files_error("acct_a", 100.0)


async def test_a_flood_of_one_accounts_errors_leaves_room_for_anothers() -> None:
    """The gate's path (record): 500 refusals of one account in a second file 20; another account's error
    in that second is filed all the same."""
    auth = FakeAuth()
    auth.down = False
    log = RequestLog(auth)  # type: ignore[arg-type]
    other = Caller("key_2", "acct_2", "sandbox", ("hotels:read",), "active", key_hint="svc_test_...Cd34")
    now = time.time()
    for n in range(500):
        log.record(now, CALLER, "GET", "/v1/stream", 429, "rate_limited", f"req_{n:024x}")
    log.record(now, other, "GET", "/v1/account", 403, "missing_scope", "req_other")
    log.record(now, CALLER, "GET", "/v1/account", 200, "", "req_ok")  # successes have their own rule
    assert await log.flush()
    sent = [r for batch in auth.batches for r in batch]
    by_account = [r.account_id for r in sent]
    # Within one second of wall time (the answer's): the first account's quota, the other's error, the 200.
    assert by_account.count("acct_2") == 1 and sent[-1].request_id == "req_ok"
    assert by_account.count("acct_1") in (21, 41)  # 20 (40 if the second turned during the loop), + the 200


async def test_the_flusher_sleeps_without_a_timer_until_the_first_record() -> None:
    auth = FakeAuth()
    auth.down = False
    log = RequestLog(auth, interval=0.0)  # type: ignore[arg-type]
    log.start()
    try:
        await asyncio.sleep(0)
        assert _waits_for_a_record(log)  # nothing to send: no timer, no wake-up
        log.record(time.time(), CALLER, "GET", "/v1/a", 403, "missing_scope", "req_1")
        async with asyncio.timeout(10):
            while not auth.batches:  # noqa: ASYNC110 (a fake: nothing to wait on)
                await asyncio.sleep(0.001)
            while not _waits_for_a_record(log):  # noqa: ASYNC110
                await asyncio.sleep(0.001)
        assert [[r.request_id for r in b] for b in auth.batches] == [["req_1"]]
    finally:
        await log.stop()


def _waits_for_a_record(log: RequestLog) -> bool:
    """The flusher is parked on the bare ``Event.wait`` (not under ``wait_for``'s timer)."""
    assert log._task is not None
    awaiting = log._task.get_coro().cr_await  # type: ignore[union-attr]
    return getattr(awaiting, "__qualname__", "") == "Event.wait"

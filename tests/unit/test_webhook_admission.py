"""The worker's admission rule (``webhookd._admission``) as tables: sends in flight and budgets in, a
verdict out; and what a claim skips given the claims a worker holds."""

from __future__ import annotations

import pytest

from webhookd._admission import (
    SANDBOX,
    Budgets,
    Counts,
    Key,
    Skips,
    Verdict,
    admit,
    answered_in_time,
    may_go_slow,
    skips,
)
from webhookd._delivery import WorkerConfig

B = Budgets(
    live=10, sandbox=4, per_endpoint=3, account_share=0.5, retry_share=0.5, slow=20, probation_share=0.5
)
SEND, WAIT, DEFER = Verdict.SEND, Verdict.WAIT, Verdict.DEFER


def k(env: str = "live", acct: str = "a", ep: str = "e1", retry: bool = False, proven: bool = True) -> Key:
    return Key(env, acct, ep, retry, proven)


def new(ep: str, acct: str = "a", env: str = "live") -> Key:
    """A send to an endpoint not proven (in probation)."""
    return k(env, acct, ep, proven=False)


def flying(*keys: Key, slow: tuple[Key, ...] = ()) -> Counts:
    counts = Counts.of([*keys, *slow])
    for key in slow:
        counts.mark_slow(key)
    return counts


@pytest.mark.parametrize(
    ("case", "key", "inflight", "verdict"),
    [
        ("nothing in flight", k(), flying(), SEND),
        ("endpoint below its cap", k(), flying(k(), k()), SEND),
        ("endpoint at its cap", k(), flying(k(), k(), k()), DEFER),
        ("another endpoint at its cap", k(ep="e2"), flying(k(), k(), k()), SEND),
        # account share: ceil(10 * 0.5) = 5; the sandbox's: ceil(4 * 0.5) = 2, below one endpoint's cap (3)
        ("account at its share", k(ep="e9"), flying(*(k(ep=f"e{i}") for i in range(5))), DEFER),
        ("another account while one is at its share", k(acct="b"),
         flying(*(k(ep=f"e{i}") for i in range(5))), SEND),
        ("sandbox: one account holds at most half the pool (issue 34: it held all of it)",
         k(env=SANDBOX, ep="e9"), flying(k(env=SANDBOX), k(env=SANDBOX, ep="e2")), DEFER),
        ("sandbox: another account has the other half", k(env=SANDBOX, acct="b"),
         flying(k(env=SANDBOX), k(env=SANDBOX, ep="e2")), SEND),
        # probation: sends to unproven endpoints hold at most 5 // 2 = 2 of the account's share
        ("probation below its fill", new("n9"), flying(new("n1")), SEND),
        ("probation full: another unproven endpoint is deferred", new("n9"),
         flying(new("n1"), new("n2")), DEFER),
        ("probation full: a proven endpoint of the account goes", k(ep="ok"),
         flying(new("n1"), new("n2")), SEND),
        ("probation full in one account: another's unproven endpoint goes", new("n9", acct="b"),
         flying(new("n1"), new("n2")), SEND),
        ("probation's slow sends left it", new("n9"), flying(slow=(new("n1"), new("n2"))), SEND),
        ("proven sends do not fill probation", new("n9"), flying(k(ep="p1"), k(ep="p2")), SEND),
        ("the account's share still counts both", new("n9"),
         flying(new("n1"), *(k(ep=f"p{i}") for i in range(4))), DEFER),
        ("live pool full: waits its turn", k(acct="z", ep="z"),
         flying(*(k(acct=f"a{i}", ep=f"e{i}") for i in range(10))), WAIT),
        ("live pool full of sandbox? never: separate pools", k(),
         flying(*(k(env=SANDBOX, acct=f"s{i}", ep=f"s{i}") for i in range(4))), SEND),
        ("sandbox pool full: deferred, never waits in the ready queue", k(env=SANDBOX, acct="z", ep="z"),
         flying(*(k(env=SANDBOX, acct=f"s{i}", ep=f"s{i}") for i in range(4))), DEFER),
        ("sandbox pool free while live is full", k(env=SANDBOX),
         flying(*(k(acct=f"a{i}", ep=f"e{i}") for i in range(10))), SEND),
        # retries: ceil(10 * 0.5) = 5 at most; first attempts are not held back by them
        ("retries at their share: a retry is deferred", k(retry=True, acct="z", ep="z"),
         flying(*(k(acct=f"a{i}", ep=f"e{i}", retry=True) for i in range(5))), DEFER),
        ("retries at their share: a first attempt goes", k(acct="z", ep="z"),
         flying(*(k(acct=f"a{i}", ep=f"e{i}", retry=True) for i in range(5))), SEND),
        # the slow lane: slow sends leave the pool and the account's share, not the endpoint's cap
        ("pool full of slow sends: a healthy endpoint goes", k(acct="z", ep="z"),
         flying(slow=tuple(k(acct=f"a{i}", ep=f"e{i}") for i in range(10))), SEND),
        ("account's share all slow: its healthy endpoint goes", k(ep="healthy"),
         flying(slow=tuple(k(ep=f"e{i}") for i in range(5))), SEND),
        ("an endpoint with a slow send gets no more", k(), flying(slow=(k(),)), DEFER),
        ("slow sends still count on their endpoint's cap", k(ep="e1"),
         flying(k(), k(), slow=(k(),)), DEFER),
    ],
)  # fmt: skip
def test_admit(case: str, key: Key, inflight: Counts, verdict: Verdict) -> None:
    assert admit(key, inflight, B) is verdict, case


# slow lane: 20 per environment, ceil(20 * 0.5) = 10 per account
@pytest.mark.parametrize(
    ("case", "key", "inflight", "expected"),
    [
        ("lane empty", k(), flying(k()), True),
        ("the account's places taken: keeps its slot", k(ep="x"),
         flying(k(ep="x"), slow=tuple(k(ep=f"e{i}") for i in range(10))), False),
        ("another account's places are its own (issue 34: one lane for all)", k(acct="b"),
         flying(k(acct="b"), slow=tuple(k(ep=f"e{i}") for i in range(10))), True),
        ("the environment's lane full", k(acct="c"),
         flying(k(acct="c"), slow=tuple(k(acct=f"a{i % 2}", ep=f"e{i}") for i in range(20))), False),
        ("the sandbox has a lane of the same size, apart", k(env=SANDBOX),
         flying(k(env=SANDBOX), slow=tuple(k(acct=f"a{i % 2}", ep=f"e{i}") for i in range(20))), True),
        ("sandbox: more slow places than its pool of 4", k(env=SANDBOX, ep="x"),
         flying(k(env=SANDBOX, ep="x"), slow=tuple(k(env=SANDBOX, ep=f"e{i}") for i in range(8))), True),
    ],
)  # fmt: skip
def test_may_go_slow(case: str, key: Key, inflight: Counts, expected: bool) -> None:
    assert may_go_slow(key, inflight, B) is expected, case


@pytest.mark.parametrize(
    ("case", "status", "seconds", "expected"),
    [
        ("200 at once", 200, 0.01, True),
        ("500 at once: it answers, it holds nothing", 500, 0.01, True),
        ("an answer past slow_after", 200, 1.5, False),
        ("no answer (timeout, refused)", 0, 0.01, False),
        ("no answer, None", None, 0.01, False),
    ],
)
def test_answered_in_time(case: str, status: int | None, seconds: float, expected: bool) -> None:
    assert answered_in_time(status, seconds, 1.0) is expected, case


@pytest.mark.parametrize(
    ("case", "held", "expected"),
    [
        ("nothing held", flying(), Skips()),
        ("endpoint with its fill", flying(k(), k(), k()), Skips(endpoints=("e1",))),
        ("endpoint with a slow send", flying(slow=(k(ep="e7"),)), Skips(endpoints=("e7",))),
        ("account with its share", flying(*(k(ep=f"e{i}") for i in range(5))), Skips(accounts=("live:a",))),
        ("account whose sends went slow: claimed again", flying(slow=tuple(k(ep=f"e{i}") for i in range(5))),
         Skips(endpoints=tuple(f"e{i}" for i in range(5)))),
        ("sandbox pool held", flying(*(k(env=SANDBOX, acct=f"s{i}", ep=f"s{i}") for i in range(4))),
         Skips(environments=(SANDBOX,))),
        ("live pool held: never skipped (it drains at its pace)",
         flying(*(k(acct=f"a{i}", ep=f"e{i}") for i in range(10))), Skips()),
        ("retries held", flying(*(k(acct=f"a{i}", ep=f"e{i}", retry=True) for i in range(5))),
         Skips(retries_in=("live",))),
        ("probation held: the account's unproven skipped, its proven claimed",
         flying(new("n1"), new("n2")), Skips(probation=("live:a",), proven=("ok",))),
        ("probation held far past its fill (a claim's overshoot): proven still claimed",
         flying(*(new(f"n{i}") for i in range(9))), Skips(probation=("live:a",), proven=("ok",))),
        ("proven claims and probation's fill reach the share: the account skipped",
         flying(new("n1"), new("n2"), *(k(ep=f"p{i}") for i in range(3))), Skips(accounts=("live:a",))),
        ("sandbox: one account's overshoot does not skip the sandbox (issue 34: it kept others out)",
         flying(*(new(f"n{i}", env=SANDBOX) for i in range(9))), Skips(probation=("sandbox:a",))),
        ("sandbox: two accounts at their share fill its pool",
         flying(*(k(env=SANDBOX, acct=acct, ep=f"{acct}{i}") for acct in "xy" for i in range(2))),
         Skips(accounts=("sandbox:x", "sandbox:y"), environments=(SANDBOX,))),
        ("another account's probation: not this one's proven endpoints",
         flying(new("n1", acct="b"), new("n2", acct="b")), Skips(probation=("live:b",))),
    ],
)  # fmt: skip
def test_skips(case: str, held: Counts, expected: Skips) -> None:
    assert skips(held, B, proven={"live:a": {"ok"}}) == expected, case


def test_counts_remove_back_to_nothing() -> None:
    counts = flying(k(), k(retry=True), new("n1"), slow=(k(ep="e2"), new("n2")))
    counts.unmark_slow(k(ep="e2"))
    counts.unmark_slow(new("n2"))
    for key in (k(), k(retry=True), k(ep="e2"), new("n1"), new("n2")):
        counts.remove(key)
    assert counts == Counts()


def test_budgets_are_stated_once_on_the_worker_config() -> None:
    cfg = WorkerConfig()
    b = cfg.budgets()
    assert (b.live, b.sandbox, b.per_endpoint) == (cfg.concurrency, cfg.sandbox_concurrency, cfg.per_endpoint)
    assert b.sandbox < b.live
    assert 4 <= b.per_endpoint <= 8
    assert b.account_cap("live") == 32 and b.account_cap(SANDBOX) == 4  # half: the other account's half
    assert b.probation_cap("live") == 16 and b.probation_cap(SANDBOX) == 2
    assert b.slow_account_cap("live") == b.slow_account_cap(SANDBOX) == 128

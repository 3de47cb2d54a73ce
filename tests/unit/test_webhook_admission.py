"""The worker's admission rule (``webhookd._admission``) as tables: sends in flight and budgets in, a
verdict out; and what a claim skips given the claims a worker holds."""

from __future__ import annotations

import pytest

from webhookd._admission import SANDBOX, Budgets, Counts, Key, Skips, Verdict, admit, skips
from webhookd._delivery import WorkerConfig

B = Budgets(live=10, sandbox=4, per_endpoint=3, account_share=0.5, retry_share=0.5, slow=20)
SEND, WAIT, DEFER = Verdict.SEND, Verdict.WAIT, Verdict.DEFER


def k(env: str = "live", acct: str = "a", ep: str = "e1", retry: bool = False) -> Key:
    return Key(env, acct, ep, retry)


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
        # account share: ceil(10 * 0.5) = 5 (never below one endpoint's cap)
        ("account at its share", k(ep="e9"), flying(*(k(ep=f"e{i}") for i in range(5))), DEFER),
        ("another account while one is at its share", k(acct="b"),
         flying(*(k(ep=f"e{i}") for i in range(5))), SEND),
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
    ],
)  # fmt: skip
def test_skips(case: str, held: Counts, expected: Skips) -> None:
    assert skips(held, B) == expected, case


def test_counts_remove_back_to_nothing() -> None:
    counts = flying(k(), k(retry=True), slow=(k(ep="e2"),))
    counts.unmark_slow(k(ep="e2"))
    for key in (k(), k(retry=True), k(ep="e2")):
        counts.remove(key)
    assert counts == Counts()


def test_budgets_are_stated_once_on_the_worker_config() -> None:
    cfg = WorkerConfig()
    b = cfg.budgets()
    assert (b.live, b.sandbox, b.per_endpoint) == (cfg.concurrency, cfg.sandbox_concurrency, cfg.per_endpoint)
    assert b.sandbox < b.live
    assert 4 <= b.per_endpoint <= 8
    assert b.account_cap("live") == 32 and b.account_cap(SANDBOX) == b.per_endpoint

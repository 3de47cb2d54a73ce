"""The credit ledger's rules (authsvc._ledger_rules), as tables of cases."""

from __future__ import annotations

import pytest

from authsvc._ledger_rules import (
    Balance,
    HoldState,
    Outcome,
    after_move,
    fits,
    hold_again,
    transition,
    warning,
)

H, C, R = HoldState.HELD, HoldState.CAPTURED, HoldState.RELEASED


@pytest.mark.parametrize(
    ("balance", "available", "level"),
    [
        (Balance(), 0, 0),
        (Balance(limit=10_000), 10_000, 1_000),
        (Balance(limit=10_000, held=2_000, captured=3_000, credits=500), 5_500, 1_000),
        (Balance(limit=999), 999, 99),  # 10 %, rounded down
        (Balance(limit=10_000, warning_set=2_500), 10_000, 2_500),
        (Balance(limit=10_000, warning_set=0), 10_000, 0),
        (Balance(limit=0, credits=300), 300, 0),
    ],
)
def test_available_and_warning_level(balance: Balance, available: int, level: int) -> None:
    assert (balance.available, balance.warning_level) == (available, level)


@pytest.mark.parametrize(
    ("balance", "amount", "expected"),
    [
        (Balance(limit=100), 100, True),  # exactly fits
        (Balance(limit=100), 101, False),
        (Balance(limit=100, held=60), 40, True),
        (Balance(limit=100, held=60), 41, False),
        (Balance(limit=100, captured=100, credits=50), 50, True),
        (Balance(limit=100), 0, False),  # nothing to hold
        (Balance(limit=100), -5, False),
        (Balance(), 1, False),  # no limit set: nothing fits
    ],
)
def test_a_hold_fits(balance: Balance, amount: int, expected: bool) -> None:
    assert fits(balance, amount) is expected


@pytest.mark.parametrize(
    ("state", "existing", "amount", "outcome"),
    [
        (H, 500, 500, Outcome.REPLAY),
        (C, 500, 500, Outcome.REPLAY),  # a confirmed booking's retry: already spent
        (R, 500, 500, Outcome.APPLY),  # a failed booking tried again: held again, if it fits
        (H, 500, 501, Outcome.CONFLICT),
        (R, 500, 1, Outcome.CONFLICT),
    ],
)
def test_a_hold_asked_again(state: HoldState, existing: int, amount: int, outcome: Outcome) -> None:
    move = hold_again(state, existing, amount)
    assert move.outcome is outcome
    assert ("booking_ref:" in move.message) is (outcome is Outcome.CONFLICT)


@pytest.mark.parametrize(
    ("state", "target", "outcome"),
    [
        (H, C, Outcome.APPLY),
        (H, R, Outcome.APPLY),
        (C, C, Outcome.REPLAY),
        (R, R, Outcome.REPLAY),
        (C, R, Outcome.APPLY),  # a confirmed booking cancelled gives its spend back
        (R, C, Outcome.CONFLICT),  # a failed booking is never spent
    ],
)
def test_hold_transitions(state: HoldState, target: HoldState, outcome: Outcome) -> None:
    assert transition(state, target).outcome is outcome


@pytest.mark.parametrize(
    ("state", "target", "held", "captured"),
    [(H, C, 0, 300), (H, R, 0, 0), (C, R, 0, 0)],
)
def test_a_move_shifts_the_amount(state: HoldState, target: HoldState, held: int, captured: int) -> None:
    start = Balance(limit=1000, held=300 if state is H else 0, captured=300 if state is C else 0)
    moved = after_move(start, state, target, 300)
    assert (moved.held, moved.captured) == (held, captured)
    assert moved.available == 1000 - held - captured


@pytest.mark.parametrize(
    ("was_below", "balance", "send", "below"),
    [
        (False, Balance(limit=1000, held=800), False, False),  # 200 left, level 100
        (False, Balance(limit=1000, held=900), False, False),  # exactly at the level: not below
        (False, Balance(limit=1000, held=901), True, True),  # first fall below: send
        (True, Balance(limit=1000, held=950), False, True),  # still below: never twice
        (True, Balance(limit=1000, held=900), False, False),  # back at the level: re-armed
        (True, Balance(limit=1000, held=950, credits=100), False, False),  # a credit lifts it
        (False, Balance(limit=1000, held=500, warning_set=600), True, True),  # a higher level set
        (False, Balance(limit=0), False, False),  # no ledger: level 0, never below
    ],
)
def test_low_balance_once_per_crossing(was_below: bool, balance: Balance, send: bool, below: bool) -> None:
    decided = warning(was_below, balance)
    assert (decided.send, decided.below) == (send, below)

"""Mode A credit: the ledger's rules as pure decisions, no I/O (decisions.md "Mode A credit in live").

A ledger is one account's credit in one environment, in one currency, amounts in integer minor units:

    available = limit - held - captured + credits

Rules:
  1. A hold is placed only when its amount (> 0) fits the available credit: a booking that does not fit
     is refused (credit_exhausted, HTTP 402) before it reaches a supplier. Available never goes below 0
     through a hold.
  2. A hold is keyed by its booking reference: the same reference again with the same amount is the same
     hold (a retry is answered, nothing changes) while it is held or captured; a released one is held
     again (the booking is being tried again, so it must fit again, rule 1); another amount is a
     conflict (the caller has two bookings under one reference).
  3. A hold moves held -> captured (booking confirmed) or held/captured -> released (failed, cancelled);
     asking for the state a hold is already in is a replay; a released hold is never captured.
  4. The warning level is the one set, else 10 % of the limit. ledger.low_balance is sent once per
     crossing: when available falls below the level while the ledger was not already below it; the
     ledger is "below" until available is at or above the level again (a release, a credit, a new
     limit), so the next fall sends it again.
"""

from __future__ import annotations

import dataclasses
import enum

# The default warning level, in percent of the credit limit.
DEFAULT_WARNING_PERCENT = 10


class HoldState(enum.StrEnum):
    HELD = "held"
    CAPTURED = "captured"
    RELEASED = "released"


@dataclasses.dataclass(frozen=True, slots=True)
class Balance:
    limit: int = 0
    held: int = 0
    captured: int = 0
    credits: int = 0
    # None: the default (DEFAULT_WARNING_PERCENT of the limit).
    warning_set: int | None = None

    @property
    def available(self) -> int:
        return self.limit - self.held - self.captured + self.credits

    @property
    def warning_level(self) -> int:
        if self.warning_set is not None:
            return self.warning_set
        return self.limit * DEFAULT_WARNING_PERCENT // 100

    @property
    def below_warning(self) -> bool:
        return self.available < self.warning_level


def fits(balance: Balance, amount: int) -> bool:
    """May a new hold of ``amount`` be placed (rule 1)?"""
    return 0 < amount <= balance.available


class Outcome(enum.Enum):
    APPLY = "apply"  # make the move
    REPLAY = "replay"  # already done: answer the hold as it is
    CONFLICT = "conflict"  # refused: the message says why


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    outcome: Outcome
    message: str = ""


def hold_again(state: HoldState, existing_amount: int, amount: int) -> Move:
    """A hold asked for a booking reference that already has one, in ``state`` (rule 2). APPLY: hold it
    again (if it fits)."""
    if existing_amount != amount:
        return Move(
            Outcome.CONFLICT,
            f"booking_ref: already holds {existing_amount}; a hold's amount cannot change "
            f"(use another booking reference)",
        )
    return Move(Outcome.APPLY if state is HoldState.RELEASED else Outcome.REPLAY)


def transition(state: HoldState, target: HoldState) -> Move:
    """May a hold in ``state`` move to ``target`` (CAPTURED or RELEASED; rule 3)?"""
    if state is target:
        return Move(Outcome.REPLAY)
    if state is HoldState.HELD or (state is HoldState.CAPTURED and target is HoldState.RELEASED):
        return Move(Outcome.APPLY)
    return Move(Outcome.CONFLICT, f"booking_ref: the hold is {state}; it cannot be {target} any more")


def after_move(balance: Balance, state: HoldState, target: HoldState, amount: int) -> Balance:
    """The balance after a hold of ``amount`` moved from ``state`` to ``target``."""
    held, captured = balance.held, balance.captured
    if state is HoldState.HELD:
        held -= amount
    elif state is HoldState.CAPTURED:
        captured -= amount
    if target is HoldState.HELD:
        held += amount
    elif target is HoldState.CAPTURED:
        captured += amount
    return dataclasses.replace(balance, held=held, captured=captured)


@dataclasses.dataclass(frozen=True, slots=True)
class Warning:
    send: bool  # queue ledger.low_balance now
    below: bool  # the ledger's "below" flag from now on


def warning(was_below: bool, balance: Balance) -> Warning:
    """Rule 4, after a change left the ledger at ``balance`` (``was_below``: its flag before)."""
    below = balance.below_warning
    return Warning(send=below and not was_below, below=below)

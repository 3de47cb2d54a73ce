"""Mode A credit records authsvc works with (storage: ``_sql_ledger``; rules: ``_ledger_rules``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from authsvc._ledger_rules import Balance, HoldState
from svckit.vocabulary import Environment

# ISO 4217 codes: three capital letters.
CURRENCY_LENGTH = 3


class EntryKind(enum.StrEnum):
    HOLD = "hold"
    CAPTURE = "capture"
    RELEASE = "release"
    CREDIT = "credit"
    LIMIT = "limit"
    WARNING_LEVEL = "warning_level"


# The entry a hold's move writes.
ENTRY_OF_MOVE = {HoldState.CAPTURED: EntryKind.CAPTURE, HoldState.RELEASED: EntryKind.RELEASE}


@dataclasses.dataclass(frozen=True, slots=True)
class Ledger:
    account_id: str
    environment: Environment
    currency: str
    balance: Balance
    below_warning: bool
    updated_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class CreditHold:
    account_id: str
    environment: Environment
    booking_ref: str
    amount: int
    currency: str
    state: HoldState
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerEntry:
    id: str
    account_id: str
    environment: Environment
    kind: EntryKind
    reference: str
    amount: int
    available_after: int
    note: str
    actor_user: str
    actor_service: str
    created_at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class HoldResult:
    """A hold after a place, capture or release, its ledger, and whether the call was a retry."""

    hold: CreditHold
    ledger: Ledger
    replayed: bool

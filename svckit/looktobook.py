"""Look-to-book: searches per confirmed booking, and the rule that says when an account's 7-day ratio has
passed its contractual target. Shared by authsvc (which sends ``account.look_to_book_exceeded`` and the
e-mail) and the portal (whose Insights page shows the ratio against the target). Standard library only.

Travel suppliers meter it (1,500 searches per booking, 2,500, or whatever the contract says): searches
cost them upstream, bookings pay for them. The target is the most searches per confirmed booking the
contract allows, set per account by operators; 0 (the default) means the account has none and is never
judged.

Why the rule is ``searches > target * max(bookings, 1)`` rather than ``searches / bookings > target``:
with no booking at all the ratio is undefined, yet an account that searched more than the target without
booking has certainly passed it (one booking more would not bring it under); an account with no booking
and fewer searches than the target has not (one booking would). Multiplying keeps it integer and exact.
The 7 days are the last seven whole UTC days and today so far; a day without traffic counts as zero.

An alert is sent at most once per ``REALERT_AFTER`` per account while the ratio stays past the target:
the ratio is a 7-day sum, so a daily repeat would report mostly the same searches again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

WINDOW_DAYS = 7
REALERT_AFTER = dt.timedelta(days=WINDOW_DAYS)


@dataclasses.dataclass(frozen=True, slots=True)
class Day:
    """One UTC day of an account's live traffic."""

    day: dt.date
    searches: int
    bookings: int

    @property
    def ratio(self) -> float | None:
        """Searches per booking; None on a day without bookings."""
        return self.searches / self.bookings if self.bookings else None


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """The sums over the window the rule judges."""

    searches: int
    bookings: int

    @property
    def ratio(self) -> float | None:
        return self.searches / self.bookings if self.bookings else None


def window(days: Sequence[Day]) -> Window:
    return Window(sum(d.searches for d in days), sum(d.bookings for d in days))


def exceeded(w: Window, target: int) -> bool:
    """Has the window's ratio passed ``target`` searches per booking? Never without a target (0)."""
    if target <= 0:
        return False
    return w.searches > target * max(w.bookings, 1)


def should_alert(w: Window, target: int, last_alert: dt.datetime | None, now: dt.datetime) -> bool:
    """Send the event and e-mail now? When exceeded and no alert was sent in the last REALERT_AFTER."""
    if not exceeded(w, target):
        return False
    return last_alert is None or now - last_alert >= REALERT_AFTER


def ratio_text(ratio: float | None) -> str:
    """How a ratio is shown: ``1,234:1``, or ``no bookings``."""
    return "no bookings" if ratio is None else f"{ratio:,.0f}:1"

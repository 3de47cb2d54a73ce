"""The retry schedule of spec section 6 as one pure decision (no I/O; ``now`` is passed in).

Attempt 1 is immediate; a failure of attempt n (n = 1..6) schedules attempt n+1 after
RETRY_DELAYS[n-1]; a failure of attempt 7 gives up and disables the endpoint.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from svckit.vocabulary import AttemptOutcome

RETRY_DELAYS: tuple[dt.timedelta, ...] = (
    dt.timedelta(minutes=1),
    dt.timedelta(minutes=5),
    dt.timedelta(minutes=30),
    dt.timedelta(hours=2),
    dt.timedelta(hours=6),
    dt.timedelta(hours=24),
)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1


# How an attempt ended: svckit's word, stored in the attempt log as its value.
Outcome = AttemptOutcome


class Action(enum.Enum):
    DONE = "done"
    RETRY = "retry"
    GIVE_UP = "give_up"  # mark the delivery failed, disable the endpoint, e-mail the admins


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    next_attempt_at: dt.datetime | None = None
    reason: str = ""  # why it gives up before the schedule ends (``_steering``); empty: the schedule ended


def next_attempt(attempt_number: int, outcome: Outcome, now: dt.datetime) -> Decision:
    """What follows attempt ``attempt_number`` (1-based, within the schedule) ending with ``outcome``."""
    if attempt_number < 1:
        raise ValueError("attempt_number starts at 1")
    if outcome.ok:
        return Decision(Action.DONE)
    if attempt_number >= MAX_ATTEMPTS:
        return Decision(Action.GIVE_UP)
    return Decision(Action.RETRY, now + RETRY_DELAYS[attempt_number - 1])

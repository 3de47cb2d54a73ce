"""Where a claim starts its walk of the due rows (``Skips.after``): a pure decision.

A claim walks the due index in order past every row it does not take: the rows it skips
(``webhookd._admission.skips``: what the worker already holds its fill of) and the ordered deliveries held
back by an earlier one of their key (``webhookd._ordering``). When one account had a deep backlog of
either kind, every claim walked all of it, and each publish (a wake) ran one again: the store (SQLite's
writer thread, the PostgreSQL server) worked in proportion to one account's backlog while every other
account's results and claims waited behind it.

After a full walk that claimed less than it asked for, every row due by its ``now`` that it left is one it
skips or one held back. So a later claim that skips at least as much (``covers``) looks only at the rows
that came due after that ``now`` (a publish's deliveries, a retry coming due, a lease running out), a range
of the due index, and takes by name the next delivery of each ordering key its results freed
(``Skips.freed``). A row can still turn up due earlier than that (a claim handed back unsent, due as it
was; another process's hand-back or result; an endpoint made unordered), so a full walk runs again once
``next_full`` passes: a poll after the last one, or, when that walk was slow, ten of its durations later,
so that full walks take at most a tenth of the store's time whatever one account's backlog.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhookd._admission import Skips, covers

FULL_WALK_SHARE = 0.1  # the most of the store's time full walks take (a slow walk waits ten of its durations)
EVERY_ROW = -1  # ``Skips.after`` of a full walk: every due row is looked at


@dataclass(frozen=True, slots=True)
class Walked:
    """The last full walk that claimed less than it asked for."""

    skips: Skips
    due_by: int  # its ``now`` (µs): every row due by then that it did not claim is one it skips
    next_full: float  # monotonic: when claims look at every due row again


def walk_from(last: Walked | None, skipped: Skips, now: float) -> int:
    """Pure: ``Skips.after`` of a claim skipping ``skipped`` at monotonic ``now``: the last full walk's
    ``due_by`` when this claim skips at least as much and the next full walk is not due, else
    ``EVERY_ROW``."""
    if last is None or now >= last.next_full or not covers(skipped, last.skips):
        return EVERY_ROW
    return last.due_by


def walked(skipped: Skips, due_by: int, started: float, took: float, poll: float) -> Walked:
    """A full walk that started at monotonic ``started`` and took ``took`` seconds: the next is due a poll
    after it ended, or ten of its durations when that is longer (``FULL_WALK_SHARE``)."""
    return Walked(skipped, due_by, started + took + max(poll, took / FULL_WALK_SHARE))

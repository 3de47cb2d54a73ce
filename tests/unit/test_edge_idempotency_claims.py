"""Who may run a request under an Idempotency-Key (edge.idempotency_claims), by table: no record, an
expired one, another request's, a stored answer, and a claim whose owner beats, has stopped beating, or
is an older release's (no owner)."""

from __future__ import annotations

import pytest

from edge.idempotency_claims import (
    HEARTBEAT_SECONDS,
    LEGACY_STALE_SECONDS,
    RETENTION_SECONDS,
    TAKEOVER_SECONDS,
    Record,
    Verdict,
    retry_after,
    verdict,
)

T = 1_800_000_000.0
H = "h" * 64


def claim(*, beat: float | None = T, owner: str | None = "edge_a", at: float = T) -> Record:
    return Record(H, "running", at, at, owner, beat)


DONE = Record(H, "done", T, T)

CASES = [
    ("no record", None, H, T, Verdict.CLAIM),
    ("expired answer", DONE, H, T + RETENTION_SECONDS, Verdict.EXPIRED),
    ("expired claim, another request", claim(), "other", T + RETENTION_SECONDS, Verdict.EXPIRED),
    ("stored answer", DONE, H, T + 60, Verdict.REPLAY),
    ("stored answer, another request", DONE, "other", T + 1, Verdict.REUSED),
    ("claim, another request", claim(), "other", T + 1, Verdict.REUSED),
    ("dead claim, another request: still reused", claim(), "other", T + 3600, Verdict.REUSED),
    ("fresh claim", claim(), H, T, Verdict.IN_USE),
    ("claim just before takeover", claim(), H, T + TAKEOVER_SECONDS, Verdict.IN_USE),
    ("claim past takeover: owner dead", claim(), H, T + TAKEOVER_SECONDS + 0.1, Verdict.TAKE_OVER),
    ("old claim, owner still beating", claim(at=T - 600, beat=T), H, T + HEARTBEAT_SECONDS, Verdict.IN_USE),
    ("old claim, beats stopped", claim(at=T - 600, beat=T), H, T + TAKEOVER_SECONDS + 1, Verdict.TAKE_OVER),
    ("older release's claim", claim(owner=None, beat=None), H, T + TAKEOVER_SECONDS + 1, Verdict.IN_USE),
    ("older release's claim, stale", claim(owner=None, beat=None), H, T + LEGACY_STALE_SECONDS + 1,
     Verdict.TAKE_OVER),
    ("owner without a beat: as an older release's", claim(beat=None), H, T + 60, Verdict.IN_USE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("record", "request_hash", "now", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verdict(record: Record | None, request_hash: str, now: float, expected: Verdict) -> None:
    assert verdict(record, request_hash, now) is expected


def test_takeover_needs_three_missed_beats() -> None:
    assert TAKEOVER_SECONDS > 3 * HEARTBEAT_SECONDS
    assert TAKEOVER_SECONDS < LEGACY_STALE_SECONDS


@pytest.mark.parametrize(
    ("record", "now", "seconds"),
    [
        (claim(), T, 8),
        (claim(), T + 7.5, 1),
        (claim(), T + 8, 1),  # never 0: "retry in 0 s" would be a busy loop
        (claim(beat=T + 4), T + 5, 7),
        (claim(owner=None, beat=None), T + 20, 100),
    ],
)
def test_retry_after_says_when_a_dead_claim_is_taken_over(record: Record, now: float, seconds: int) -> None:
    assert retry_after(record, now) == seconds

"""The GCRA table shared by the pure function's unit test and the Redis script's integration test."""

from __future__ import annotations

from edge.gcra import Limit

T0 = 1_700_000_000_000_000  # a wall-clock time in µs, as Redis TIME gives it
TEN = Limit(period=100_000, tolerance=2_000_000)  # 10/s, bursts of 20
SLOW = Limit(period=5_000_000, tolerance=5_000_000)  # 0.2/s: bursts of one

# name, tat before (None: no key), now, limit -> allowed, tat after, retry_after µs, remaining
CASES = [
    ("a new key is allowed with the burst left", None, T0, TEN, True, T0 + 100_000, 0, 19),
    ("a tat in the past is a new key", T0 - 9_000_000, T0, TEN, True, T0 + 100_000, 0, 19),
    ("requests within the burst move the tat on", T0 + 500_000, T0, TEN, True, T0 + 600_000, 0, 14),
    ("the last request of the burst", T0 + 1_900_000, T0, TEN, True, T0 + 2_000_000, 0, 0),
    ("past the burst: refused, tat unchanged", T0 + 2_000_000, T0, TEN, False, T0 + 2_000_000, 100_000, 0),
    ("refused requests wait for one period", T0 + 2_050_000, T0, TEN, False, T0 + 2_050_000, 150_000, 0),
    ("time lets one more in", T0 + 2_000_000, T0 + 100_000, TEN, True, T0 + 2_100_000, 0, 0),
    ("a slow rate allows one request", None, T0, SLOW, True, T0 + 5_000_000, 0, 0),
    (
        "and refuses the next for a period",
        T0 + 5_000_000,
        T0 + 1_000_000,
        SLOW,
        False,
        T0 + 5_000_000,
        4_000_000,
        0,
    ),
]
IDS = [c[0] for c in CASES]

"""Spans of time as partners type them: ``30s``, ``5m``, ``2h``, ``1d``, and combinations such as
``1h30m`` (largest unit first, each unit once, whole numbers). Pure: the edge's sandbox clock route and
``svc clock advance`` parse with it; ``spelled`` writes a span back the same way.
"""

from __future__ import annotations

import datetime as dt
import re

UNITS: tuple[tuple[str, int], ...] = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_SECONDS = dict(UNITS)
# Each unit at most once, largest first; at most 7 digits a unit (a week is 604800 s).
_SPAN = re.compile("".join(rf"(?:(?P<{u}>[0-9]{{1,7}}){u})?" for u, _ in UNITS))
EXAMPLES = "30s, 5m, 2h, 1d or 1h30m"

# How far one advance of the sandbox clock may move its schedule (webhookd checks it too).
CLOCK_ADVANCE_MIN = dt.timedelta(seconds=1)
CLOCK_ADVANCE_MAX = dt.timedelta(days=7)


def parse_span(text: str) -> dt.timedelta:
    """``1h30m`` -> 90 minutes. ValueError, saying what is expected, for anything else."""
    m = _SPAN.fullmatch(text.strip().lower())
    if not text.strip() or m is None:
        raise ValueError(f"not a duration: {text[:32]!r}; expected e.g. {EXAMPLES}")
    return dt.timedelta(seconds=sum(int(n) * _SECONDS[u] for u, n in m.groupdict().items() if n))


def spelled(span: dt.timedelta) -> str:
    """A whole number of seconds as ``parse_span`` reads it, largest unit first: 5400 s -> ``1h30m``."""
    left = int(span.total_seconds())
    if left <= 0:
        return "0s"
    parts = []
    for unit, seconds in UNITS:
        n, left = divmod(left, seconds)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts)


def clock_advance(text: str) -> dt.timedelta:
    """One advance of the sandbox clock: a span from ``CLOCK_ADVANCE_MIN`` to ``CLOCK_ADVANCE_MAX``."""
    span = parse_span(text)
    if not CLOCK_ADVANCE_MIN <= span <= CLOCK_ADVANCE_MAX:
        raise ValueError(
            f"{text.strip()[:32]!r} is out of range: the sandbox clock advances by "
            f"{spelled(CLOCK_ADVANCE_MIN)} to {spelled(CLOCK_ADVANCE_MAX)} at a time"
        )
    return span

"""The spans partners type for the sandbox clock (svckit.durations), by table."""

from __future__ import annotations

import datetime as dt

import pytest

from svckit.durations import clock_advance, parse_span, spelled

S, M, H, D = (dt.timedelta(seconds=n) for n in (1, 60, 3600, 86400))

PARSED = [
    # (text, span)
    ("30s", 30 * S),
    ("5m", 5 * M),
    ("2h", 2 * H),
    ("1d", D),
    ("1h30m", 90 * M),
    ("1d2h3m4s", D + 2 * H + 3 * M + 4 * S),
    ("2h30s", 2 * H + 30 * S),
    (" 6H ", 6 * H),  # spaces around and upper case are forgiven
    ("0s", dt.timedelta(0)),  # a span; the clock's bounds refuse it (below)
    ("90m", 90 * M),  # a unit need not be carried over
]
REFUSED = [
    "",
    "   ",
    "2",  # no unit
    "h",  # no number
    "1.5h",  # whole numbers only
    "-1h",
    "+1h",
    "1w",  # no weeks
    "30m1h",  # largest unit first
    "1h1h",  # each unit once
    "1h 30m",  # no space inside
    "2 h",
    "12345678s",  # at most 7 digits a unit
    "1h30",
    "\uff12h",  # ASCII digits only (a full-width two)
]


@pytest.mark.parametrize(("text", "span"), PARSED)
def test_parse_span(text: str, span: dt.timedelta) -> None:
    assert parse_span(text) == span


@pytest.mark.parametrize("text", REFUSED)
def test_parse_span_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected e\.g\. 30s, 5m, 2h, 1d or 1h30m"):
        parse_span(text)


@pytest.mark.parametrize(
    ("span", "text"),
    [(30 * S, "30s"), (90 * M, "1h30m"), (D, "1d"), (D + 4 * S, "1d4s"), (26 * H, "1d2h"), (0 * S, "0s")],
)
def test_spelled_reads_back(span: dt.timedelta, text: str) -> None:
    assert spelled(span) == text
    assert parse_span(text) == span


@pytest.mark.parametrize(
    ("text", "span"),
    [("1s", S), ("2h", 2 * H), ("7d", 7 * D), ("6d23h59m59s", 7 * D - S), ("168h", 7 * D)],
)
def test_clock_advance_within_bounds(text: str, span: dt.timedelta) -> None:
    assert clock_advance(text) == span


@pytest.mark.parametrize("text", ["0s", "0m", "7d1s", "8d", "200h"])
def test_clock_advance_out_of_bounds(text: str) -> None:
    with pytest.raises(ValueError, match="advances by 1s to 7d at a time"):
        clock_advance(text)

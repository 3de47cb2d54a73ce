"""The request log's pure rules (authsvc._requestlog), by table: the per-account daily bound, the status
filter, the path kept."""

from __future__ import annotations

import datetime as dt

import pytest

from authsvc._requestlog import MAX_PATH, admit, cut_path, day_of, statuses

ADMIT = [
    # (filed today before, offered now, bound) -> (kept, dropped)
    (0, 3, 5, (3, 0)),
    (3, 2, 5, (2, 0)),  # exactly reaches the bound
    (3, 4, 5, (2, 2)),  # crosses it: the first fit, the rest dropped
    (5, 1, 5, (0, 1)),  # at the bound
    (9, 4, 5, (0, 4)),  # past it (counted dropped records raise the count)
    (0, 0, 5, (0, 0)),
    (0, 7, 0, (0, 7)),  # a bound of 0 keeps nothing
    (-1, 2, 5, (2, 0)),  # a count below 0 (never stored) is 0
]


@pytest.mark.parametrize(("filed", "offered", "bound", "expected"), ADMIT)
def test_admit(filed: int, offered: int, bound: int, expected: tuple[int, int]) -> None:
    assert admit(filed, offered, bound) == expected


STATUSES = [
    (0, 0, None),
    (403, 0, (403, 404)),
    (0, 2, (200, 300)),
    (0, 4, (400, 500)),
    (0, 5, (500, 600)),
    (404, 4, (404, 405)),
]


@pytest.mark.parametrize(("status", "status_class", "expected"), STATUSES)
def test_statuses(status: int, status_class: int, expected: tuple[int, int] | None) -> None:
    assert statuses(status, status_class) == expected


@pytest.mark.parametrize(("status", "status_class"), [(99, 0), (600, 0), (0, 6), (0, -1), (404, 5)])
def test_statuses_refused(status: int, status_class: int) -> None:
    with pytest.raises(ValueError):
        statuses(status, status_class)


def test_cut_path_and_day() -> None:
    assert cut_path("/v1/a?key=secret") == "/v1/a"
    assert len(cut_path("/" + "x" * 1000)) == MAX_PATH
    late = dt.datetime(2026, 5, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))
    assert day_of(late) == "2026-05-02"

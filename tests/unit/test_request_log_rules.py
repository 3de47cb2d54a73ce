"""The request log's pure rules (authsvc._requestlog), by table: the per-account daily bound, the status
filter, the path kept."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from authsvc import _requestlog as rl
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


ROUTES = [
    # (template, path, matches)
    ("/v1/hotels/search", "/v1/hotels/search", True),
    ("/v1/hotels/search", "/v1/hotels/searches", False),
    ("/v1/hotels/offers/{offer_id}", "/v1/hotels/offers/off_1", True),
    ("/v1/hotels/offers/{offer_id}", "/v1/hotels/offers/", False),
    ("/v1/hotels/offers/{offer_id}", "/v1/hotels/offers/a/b", False),
    ("/v1/b/{id}/modify", "/v1/b/bk_1/modify", True),
    ("/v1/b/{id}/modify", "/v1/b/bk_1/x/modify", False),
    ("/v1/a_b/{id}", "/v1/aXb/1", False),  # _ is no wildcard
    ("/v1/a.b/{id}", "/v1/aXb/1", False),  # nor is .
    ("/v1/hotels/offers/<offer_id>", "/v1/hotels/offers/off_1", True),  # the edge's spelling
    ("/v1/hotels/offers/<offer_id:str>", "/v1/hotels/offers/off_1/x", False),
]


@pytest.mark.parametrize(("template", "path", "matches"), ROUTES)
def test_route_templates_match_one_segment_per_parameter(template: str, path: str, matches: bool) -> None:
    assert rl.valid_route(template)
    assert rl.route_matches(template, path) is matches
    # The SQL narrowing never loses a match.
    if matches:
        assert like_regex(rl.route_like(template)).fullmatch(path)


def like_regex(pattern: str) -> re.Pattern[str]:
    """What SQL LIKE with escape character backslash matches, as a regular expression."""
    out, chars = [], iter(pattern)
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars)))
        else:
            out.append({"%": ".*", "_": "."}.get(ch, re.escape(ch)))
    return re.compile("".join(out), re.DOTALL)


@pytest.mark.parametrize(
    "template", ["", "v1/x", "/v1/{a}{b}", "/v1/{a b}", "/v1//x", "/v1/<a", "/v1/" + "x" * 300]
)
def test_bad_route_templates(template: str) -> None:
    assert not rl.valid_route(template)


def test_like_pattern_escapes_literals() -> None:
    assert rl.route_like("/v1/a_b/{id}/c%") == "/v1/a\\_b/%/c\\%"

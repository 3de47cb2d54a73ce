"""The Insights charts: each says what it shows (role=img, aria-label), escapes what it is given, and
draws with attributes only (no inline style: the portal's CSP forbids it)."""

from __future__ import annotations

import re

from portal import insight_charts as c
from portal.insights_data import OUTCOMES

EVIL = '<script>alert("x")</script>'


def bars_of(svg: str) -> list[float]:
    return [float(h) for h in re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="([^"]+)"', svg)]


def test_stacked_bars_label_escape_and_scale() -> None:
    svg = str(c.stacked_bars(["09:00", EVIL], [[10, 0, 0, 0, 0, 5], [0, 0, 0, 0, 0, 0]], OUTCOMES, EVIL))
    assert 'role="img"' in svg and "<script>" not in svg and "&lt;script&gt;" in svg
    assert "style=" not in svg
    heights = bars_of(svg)
    assert len(heights) == 2  # zero layers draw nothing
    assert heights[0] == 2 * heights[1]  # 10 OK over 5 server errors, to scale
    assert "<title>09:00: 5 5xx</title>" in svg


def test_lines_skip_missing_points_and_draw_the_limit() -> None:
    svg = str(
        c.lines(["a", "b", "c"], [("p95", "#000", [100.0, None, 300.0])], "latency", " ms", limit=500.0)
    )
    (points,) = re.findall(r'points="([^"]+)"', svg)
    assert len(points.split()) == 2
    assert 'stroke-dasharray="6 4"' in svg and 'aria-label="latency"' in svg


def test_ratio_gauge_marks_the_target_and_colours_past_it() -> None:
    past = str(c.ratio_gauge(1820.0, 1500, "past"))
    within = str(c.ratio_gauge(900.0, 1500, "within"))
    none = str(c.ratio_gauge(None, 0, "no target"))
    assert "#b42318" in past and "#b42318" not in within and "target 1,500:1" in past
    assert "target" not in none.replace('aria-label="no target"', "")


def test_legend_lists_each_colour() -> None:
    html = str(c.legend([(label, colour) for _, label, colour in OUTCOMES]))
    assert html.count("<li>") == len(OUTCOMES) and 'aria-hidden="true"' in html

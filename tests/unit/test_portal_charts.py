"""The portal's usage bar turns red exactly where authsvc sends search_quota.threshold."""

from __future__ import annotations

import pytest

from portal.charts import usage_bar
from svckit.quota import threshold_of

RED = "#c0392b"


@pytest.mark.parametrize(
    ("used", "allowance", "red"),
    [(0, 100, False), (79, 100, False), (80, 100, True), (100, 100, True), (7_999, 10_000, False),
     (8_000, 10_000, True), (28, 36, False), (29, 36, True), (1, 1, True), (5, 0, False)],
)  # fmt: skip
def test_red_from_the_threshold(used: int, allowance: int, red: bool) -> None:
    assert (RED in usage_bar(used, allowance)) is red
    if allowance > 0:
        assert red is (used >= threshold_of(allowance))

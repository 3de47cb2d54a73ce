"""The cap on an account's webhook endpoints per environment (webhookd._endpoint_cap), by table."""

from __future__ import annotations

import pytest

from webhookd._endpoint_cap import MAX_ENDPOINTS, refusal


@pytest.mark.parametrize(
    ("existing", "limit", "fits"),
    [
        (0, MAX_ENDPOINTS, True),  # the first endpoint
        (MAX_ENDPOINTS - 1, MAX_ENDPOINTS, True),  # the last that fits
        (MAX_ENDPOINTS, MAX_ENDPOINTS, False),  # one past the cap
        (MAX_ENDPOINTS + 5, MAX_ENDPOINTS, False),  # over it already (the cap was lowered): still none
        (0, 1, True),
        (1, 1, False),
        (0, 0, False),  # an operator who stops registrations
        (3, 100, True),  # an operator's higher cap
    ],
)
def test_one_more_endpoint_fits_only_below_the_limit(existing: int, limit: int, fits: bool) -> None:
    why = refusal(existing, limit, "live")
    assert (why is None) is fits
    if why is not None:  # the message names the count, the limit, the environment and the way out
        assert f"the limit is {limit} per account and environment" in why
        assert f"{existing} webhook endpoints in live" in why and "delete one" in why

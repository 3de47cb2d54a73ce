"""The daily search allowance's warning level, shared by authsvc (which sends search_quota.threshold),
the portal (whose usage bar turns red there) and the sandbox (whose sample says the same)."""

from __future__ import annotations

import math

# search_quota.threshold fires once a day when this share of the allowance has been used.
THRESHOLD_PERCENT = 80


def threshold_of(allowance: int) -> int:
    """The number of searches at which the warning fires: at least one."""
    return max(1, math.ceil(allowance * THRESHOLD_PERCENT / 100))

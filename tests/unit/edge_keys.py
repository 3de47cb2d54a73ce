"""Well-formed API keys and the refused error type, for the edge's pure tables (test_edge_*.py)."""

from __future__ import annotations

import pytest

from edge.exceptions import EdgeError
from svckit.apikeys import checksum


def well_formed(body: str) -> str:
    return body + checksum(body)


KEY = well_formed("svc_test_" + "A" * 32)


LIVE_KEY = well_formed("svc_live_" + "b1" * 16)


BAD_CHECKSUM = KEY[:-1] + ("x" if KEY[-1] != "x" else "y")


def error_type(fn, *args):
    with pytest.raises(EdgeError) as info:
        fn(*args)
    return info.value.type

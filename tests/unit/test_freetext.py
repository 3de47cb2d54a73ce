"""What free text may not hold (svckit.freetext), shared by authsvc and webhookd."""

from __future__ import annotations

import pytest

from svckit.freetext import contains_secret, free_text_problem

KEY = "svc_test_" + "Ab1" * 11 + "x12345"


@pytest.mark.parametrize(
    ("value", "max_len", "problem"),
    [
        ("Checkout webhook", 100, None),
        ("", 100, None),
        ("svc_live_ is the live prefix", 100, None),  # a prefix alone is not a key
        ("whsec_ secrets sign", 100, None),
        ("x" * 101, 100, "at most 100 characters"),
        ("line\nbreak", 100, "control characters are not allowed"),
        ("del\x7f", 100, "control characters are not allowed"),
        (f"pasted {KEY} here", 100, "must not contain an API key or signing secret"),
        ("svc_live_ABCDEFGH12345678", 100, "must not contain an API key or signing secret"),
        ("whsec_aGVsbG8gd29ybGQ=", 100, "must not contain an API key or signing secret"),
    ],
)
def test_free_text_problem(value: str, max_len: int, problem: str | None) -> None:
    assert free_text_problem(value, max_len=max_len) == problem
    assert contains_secret(value) == (problem == "must not contain an API key or signing secret")

"""What free text may not hold (svckit.freetext), shared by authsvc and webhookd."""

from __future__ import annotations

import pytest

from svckit.freetext import contains_secret, content_problem, free_text_problem
from webhookd import _convert
from webhookd._errors import InvalidRequest

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


def test_content_problem_is_free_text_without_the_length_bound() -> None:
    assert content_problem("x" * 5000) is None
    assert content_problem("line\nbreak") == "control characters are not allowed"
    assert content_problem(f"pasted {KEY} here") == "must not contain an API key or signing secret"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://hooks.example.com/\x00", "url: control characters are not allowed"),
        (f"https://hooks.example.com/?key={KEY}", "url: must not contain an API key or signing secret"),
    ],
)
def test_webhook_url_refuses_what_free_text_refuses(url: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        _convert.url(url)
    assert str(caught.value) == message
    assert (
        _convert.url("https://hooks.example.com/" + "x" * 3000) == "https://hooks.example.com/" + "x" * 3000
    )

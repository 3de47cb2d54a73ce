"""edge.secretscanning: what a report body may be (400/413 otherwise), which tokens are worth a look-up,
and GitHub's feedback array."""

from __future__ import annotations

import hashlib
import json

import pytest

from edge.exceptions import EdgeError
from edge.secretscanning import MAX_TOKENS, Reported, candidates, github_feedback, parse_batch
from svckit.apikeys import checksum
from svckit.ids import random_base62


def key(prefix: str = "svc_live_") -> str:
    body = prefix + random_base62(32)
    return body + checksum(body)


@pytest.mark.parametrize(
    ("body", "etype"),
    [
        (b"", "invalid_request"),
        (b"{}", "invalid_request"),
        (b'"x"', "invalid_request"),
        (b"[1]", "invalid_request"),
        (b'[{"type": "x"}]', "invalid_request"),
        (b'[{"token": ""}]', "invalid_request"),
        (b'[{"token": 5}]', "invalid_request"),
        (b'[{"token": "a", "url": 5}]', "invalid_request"),
        (json.dumps([{"token": "a" * 1025}]).encode(), "invalid_request"),
        (b"\xff\xfe", "invalid_request"),
        (json.dumps([{"token": "a"}] * (MAX_TOKENS + 1)).encode(), "payload_too_large"),
    ],
)
def test_bad_bodies_are_refused(body: bytes, etype: str) -> None:
    with pytest.raises(EdgeError) as refused:
        parse_batch(body)
    assert refused.value.type == etype


def test_a_full_batch_and_an_empty_one_are_accepted() -> None:
    assert len(parse_batch(json.dumps([{"token": "a"}] * MAX_TOKENS).encode())) == MAX_TOKENS
    assert parse_batch(b"[]") == []


def test_gitlab_names_the_url_location() -> None:
    (r,) = parse_batch(
        b'[{"token": "t", "type": "x", "location": "https://g.example/a"}]', url_field="location"
    )
    assert r == Reported("t", "x", "https://g.example/a", "")


def test_only_well_formed_keys_are_looked_up_each_once() -> None:
    real = key()
    broken = real[:-1] + ("A" if real[-1] != "A" else "B")
    reported = [
        Reported(real),
        Reported(real),
        Reported(broken),
        Reported("some_token"),
        Reported(key("svc_test_")),
    ]
    assert [r.token for r in candidates(reported)] == [real, reported[4].token]


def test_feedback_labels_each_reported_token_by_its_sha256() -> None:
    ours, theirs = key(), key()
    reported = [Reported(ours, "svc_api_key"), Reported(theirs), Reported("x", "custom")]
    out = github_feedback(reported, {hashlib.sha256(ours.encode()).hexdigest()})
    assert out == [
        {
            "token_hash": hashlib.sha256(ours.encode()).hexdigest(),
            "token_type": "svc_api_key",
            "label": "true_positive",
        },
        {
            "token_hash": hashlib.sha256(theirs.encode()).hexdigest(),
            "token_type": "svc_api_key",
            "label": "false_positive",
        },
        {"token_hash": hashlib.sha256(b"x").hexdigest(), "token_type": "custom", "label": "false_positive"},
    ]

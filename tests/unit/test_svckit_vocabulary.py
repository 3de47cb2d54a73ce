"""svckit.prototables: every word has its proto twin, both directions agree, UNSPECIFIED is no word."""

from __future__ import annotations

import pytest

from svckit import prototables as t
from svckit.vocabulary import DeliveryStatus, Environment, KeyStatus
from travel.auth.v1 import auth_pb2
from travel.webhooks.v1 import webhooks_pb2

TABLES = [
    t.AUTH_ENVIRONMENT,
    t.HOOKS_ENVIRONMENT,
    t.ACCOUNT_STATUS,
    t.ACCOUNT_MODE,
    t.KEY_STATUS,
    t.USER_ROLE,
    t.ENDPOINT_STATUS,
    t.DELIVERY_STATUS,
    t.ATTEMPT_OUTCOME,
]


@pytest.mark.parametrize("table", TABLES, ids=lambda x: x.prefix)
def test_round_trip_and_unspecified(table: t.EnumTable) -> None:  # type: ignore[type-arg]
    for member in table.words:
        assert table.word(table.pb(member)) is member
        assert table.pb(member.value) == table.pb(member)
    with pytest.raises(ValueError):
        table.word(0)
    assert table.get(0, "?") == "?"


@pytest.mark.parametrize(
    ("table", "word", "number"),
    [
        (t.AUTH_ENVIRONMENT, Environment.LIVE, auth_pb2.ENVIRONMENT_LIVE),
        (t.HOOKS_ENVIRONMENT, Environment.SANDBOX, webhooks_pb2.ENVIRONMENT_SANDBOX),
        (t.KEY_STATUS, KeyStatus.REVOKED, auth_pb2.KEY_STATUS_REVOKED),
        (t.DELIVERY_STATUS, DeliveryStatus.HELD, webhooks_pb2.DELIVERY_STATUS_HELD),
        (t.ACCOUNT_MODE, "B", auth_pb2.ACCOUNT_MODE_B),
    ],
)
def test_known_pairs(table: t.EnumTable, word: str, number: int) -> None:  # type: ignore[type-arg]
    assert table.pb(word) == number
    assert table.get(number) == str(word)


def test_unknown_word_refused() -> None:
    with pytest.raises(ValueError):
        t.KEY_STATUS.pb("deleted")

"""The live-key gate, by table: who may create a key of which environment, certified or not."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from authsvc._certify_gate import MISSING_MESSAGE, creation_refusal
from authsvc._model import Account
from svckit.vocabulary import AccountMode, AccountStatus, Environment

NOW = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
ACCOUNT = Account("acct_1", "P", AccountMode.A, AccountStatus.ACTIVE, (), 100, NOW, NOW)


@pytest.mark.parametrize(
    ("name", "required", "certified_at", "environment", "refused"),
    [
        ("default: not required, live", False, None, Environment.LIVE, False),
        ("not required, sandbox", False, None, Environment.SANDBOX, False),
        ("required, not certified, live", True, None, Environment.LIVE, True),
        ("required, not certified, sandbox", True, None, Environment.SANDBOX, False),
        ("required, certified, live", True, NOW, Environment.LIVE, False),
        ("not required, certified, live", False, NOW, Environment.LIVE, False),
    ],
)
def test_creation_refusal(
    name: str, required: bool, certified_at: dt.datetime | None, environment: Environment, refused: bool
) -> None:
    account = dataclasses.replace(ACCOUNT, require_certification=required, certified_at=certified_at)
    assert creation_refusal(account, environment) == (MISSING_MESSAGE if refused else "")

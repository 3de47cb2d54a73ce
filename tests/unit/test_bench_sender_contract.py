"""The webhook benchmark's storage-only sender stands in for webhookd's Sender: it must take every
argument the delivery worker passes (a keyword added to Sender.send once broke the benchmark's
storage phase, which no test ran)."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / "scripts"))

from benchwebhooks.worker import NullSender

from webhookd._retry import Outcome
from webhookd._sender import Sender


def test_null_sender_takes_every_argument_of_the_real_one() -> None:
    params = list(inspect.signature(Sender.send).parameters.values())[1:]
    args = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    positional = ["https://r.example/hook", b"{}", ["whsec_dGVzdA=="], "evt_1", dt.datetime.now(dt.UTC)]
    required = [p for p in params if p.default is inspect.Parameter.empty]
    assert len(required) == len(positional), [p.name for p in required]
    result = asyncio.run(NullSender().send(*positional, **args))
    assert result.result is Outcome.SUCCEEDED

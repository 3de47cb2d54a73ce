"""The benchmark's floor (scripts/benchwebhooks/floor.py) writes webhookd's own tables with statements of its
own: run on the schema the migrations make, one cycle claims what is due, and the next records it as
webhookd would (the attempt kept, the delivery succeeded, its queue row gone), so a migration that
changes those tables breaks this test rather than the bench."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import sqlite3
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / "scripts"))

from benchwebhooks.floor import _Store
from benchwebhooks.worker import endpoint, preload

from webhookd._sql import SqlRepository


async def _preloaded(path: pathlib.Path, n: int) -> str:
    repo = await SqlRepository.open(f"sqlite+aiosqlite:///{path}")
    ep = endpoint(8443)
    await repo.create_endpoint(ep)
    await preload(repo, ep.id, [dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)] * n)
    await repo.close()
    return str(ep.id)


def test_a_floor_cycle_claims_what_is_due_and_the_next_records_it(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "floor.db"
    endpoint_id = asyncio.run(_preloaded(path, 3))
    store = _Store(str(path))
    claimed = store.cycle([], 2)
    assert len(claimed) == 2
    assert store.cycle([], 5) and not store.cycle([], 5)  # the third, then nothing (the others leased)
    d_id, event_id, ep_id, account_id, env, attempts, body = claimed[0]
    assert ep_id == endpoint_id and attempts == 0 and json.loads(body)["id"] == event_id
    headers = json.dumps({"X-Service-Signature": "t=1,v1=x"})
    result = (d_id, "att_1", d_id, ep_id, event_id, account_id, env, 1, 200, "ok", headers, 1.5, 1, "{}")
    assert store.cycle([result], 0) == []
    store.db.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT status, attempt_count FROM wh_deliveries WHERE id = ?", (d_id,)).fetchone() == (
        "succeeded",
        1,
    )
    assert db.execute("SELECT count(*) FROM wh_pending WHERE id = ?", (d_id,)).fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM wh_pending").fetchone() == (2,)
    row = db.execute("SELECT outcome, response_status, request_headers FROM wh_attempts").fetchone()
    assert row == ("succeeded", 200, headers)

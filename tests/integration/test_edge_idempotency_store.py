"""The edge's idempotency store on SQLite and PostgreSQL (db_url): claim, replay, reuse, in-flight,
takeover of a dead process's claim, expiry, exactly one owner under concurrent claims, and stored bodies
sealed at rest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from edge.exceptions import EdgeError
from edge.idempotency import RETENTION_SECONDS, STALE_CLAIM_SECONDS, SqlIdempotencyStore, Stored, records
from svckit.db import create_engine
from svckit.secretbox import SecretBox, new_key, parse_key

T0 = 1_800_000_000.0


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlIdempotencyStore]:
    engine = create_engine(db_url)
    s = SqlIdempotencyStore(engine, hold=0)  # a key in use is refused at once (the hold: below)
    await s.migrate()
    await s.migrate()  # idempotent
    try:
        yield s
    finally:
        await s.close()
        await engine.dispose()


async def refusal(coro: object) -> str:
    with pytest.raises(EdgeError) as info:
        await coro  # type: ignore[misc]
    return info.value.type


async def test_claim_complete_replay(store: SqlIdempotencyStore) -> None:
    assert await store.claim("acct_1", "live", "k1", "h1", T0) is None
    assert await refusal(store.claim("acct_1", "live", "k1", "h1", T0 + 1)) == "idempotency_key_in_use"
    assert await refusal(store.claim("acct_1", "live", "k1", "other", T0 + 1)) == "idempotency_key_reused"
    await store.complete("acct_1", "live", "k1", 201, '{"id": "we_1"}', {"Content-Type": "application/json"})
    assert await store.claim("acct_1", "live", "k1", "h1", T0 + 2) == Stored(
        201, '{"id": "we_1"}', {"Content-Type": "application/json"}
    )
    assert await refusal(store.claim("acct_1", "live", "k1", "other", T0 + 2)) == "idempotency_key_reused"


@pytest.mark.parametrize(("account", "env"), [("acct_2", "live"), ("acct_1", "sandbox")])
async def test_keys_are_scoped_to_account_and_environment(
    store: SqlIdempotencyStore, account: str, env: str
) -> None:
    assert await store.claim("acct_1", "live", "k", "h", T0) is None
    assert await store.claim(account, env, "k", "different", T0) is None


async def test_release_lets_the_key_run_again(store: SqlIdempotencyStore) -> None:
    assert await store.claim("acct_1", "live", "k", "h", T0) is None
    await store.release("acct_1", "live", "k")
    assert await store.claim("acct_1", "live", "k", "h2", T0) is None


async def test_release_never_removes_a_completed_record(store: SqlIdempotencyStore) -> None:
    assert await store.claim("acct_1", "live", "k", "h", T0) is None
    await store.complete("acct_1", "live", "k", 200, "{}", {})
    await store.release("acct_1", "live", "k")
    assert await store.claim("acct_1", "live", "k", "h", T0) == Stored(200, "{}", {})


async def test_stale_claim_is_taken_over(store: SqlIdempotencyStore) -> None:
    assert await store.claim("acct_1", "live", "k", "h", T0) is None
    assert await refusal(store.claim("acct_1", "live", "k", "h", T0 + STALE_CLAIM_SECONDS - 1)) == (
        "idempotency_key_in_use"
    )
    assert await store.claim("acct_1", "live", "k", "h", T0 + STALE_CLAIM_SECONDS + 1) is None


async def test_a_key_in_use_is_held_until_the_first_ends(store: SqlIdempotencyStore) -> None:
    """A repeat finding the key in use waits (``hold``) for the first request: its answer if it is
    stored, the key if the first gave it up (a 5xx), the 409 if it still runs when the hold ends."""
    waiting = SqlIdempotencyStore(store.engine, hold=30)
    for end, expected in (("complete", Stored(201, "{}", {})), ("release", None)):
        key = f"held-{end}"
        assert await store.claim("acct_1", "live", key, "h", T0) is None
        repeat = asyncio.create_task(waiting.claim("acct_1", "live", key, "h", T0 + 1))
        await asyncio.sleep(0.7)  # the repeat has looked once and waits
        assert not repeat.done()
        if end == "complete":
            await store.complete("acct_1", "live", key, 201, "{}", {})
        else:
            await store.release("acct_1", "live", key)
        assert await repeat == expected
    await waiting.close()
    brief = SqlIdempotencyStore(store.engine, hold=1)
    assert await store.claim("acct_1", "live", "held-long", "h", T0) is None
    assert await refusal(brief.claim("acct_1", "live", "held-long", "h", T0 + 1)) == "idempotency_key_in_use"


async def test_records_expire_after_24_hours(store: SqlIdempotencyStore) -> None:
    assert await store.claim("acct_1", "live", "k", "h", T0) is None
    await store.complete("acct_1", "live", "k", 200, "{}", {})
    later = T0 + RETENTION_SECONDS + 1
    assert await store.claim("acct_1", "live", "k", "new-request", later) is None  # a fresh claim
    assert await store.claim("acct_1", "live", "k2", "h", T0) is None
    assert await store.purge(later) == 1  # k2 expired; k was claimed anew at `later`


async def test_concurrent_claims_have_exactly_one_owner(store: SqlIdempotencyStore) -> None:
    results = await asyncio.gather(
        *(store.claim("acct_1", "live", "race", "h", T0) for _ in range(8)), return_exceptions=True
    )
    owners = [r for r in results if r is None]
    refused = [r for r in results if isinstance(r, EdgeError)]
    assert len(owners) == 1
    assert len(refused) == 7 and all(r.type == "idempotency_key_in_use" for r in refused)


# -- sealing stored responses at rest (issue 9 defect 1) --------------------------------------------------
SECRET = "whsec_" + "c2VjcmV0" * 5 + "AAA="
BODY = '{"id": "we_1", "secret": "' + SECRET + '"}'
JSON = {"Content-Type": "application/json"}


async def _stored_bodies(store: SqlIdempotencyStore) -> list[str]:
    async with store.engine.connect() as conn:
        return [str(r[0]) for r in await conn.execute(sa.select(records.c.body)) if r[0] is not None]


async def test_stored_bodies_are_sealed_and_replay_in_full(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        key = parse_key(new_key())
        store = SqlIdempotencyStore(engine, SecretBox(key))
        await store.migrate()
        assert await store.claim("acct_1", "live", "reg-1", "h", T0) is None
        await store.complete("acct_1", "live", "reg-1", 201, BODY, JSON)
        (stored,) = await _stored_bodies(store)
        assert stored.startswith("enc1:") and SECRET not in stored and "we_1" not in stored
        # A retry (any edge process with the same key) gets the usable answer.
        again = SqlIdempotencyStore(engine, SecretBox(key))
        assert await again.claim("acct_1", "live", "reg-1", "h", T0 + 1) == Stored(201, BODY, JSON)
        # Copied onto another record it does not open: that record runs again instead of replaying.
        async with engine.begin() as conn:
            await conn.execute(
                records.insert().values(
                    account_id="acct_2", environment="live", idem_key="reg-1", request_hash="h",
                    state="done", status_code=201, body=stored, headers="{}", created_at=T0, claimed_at=T0,
                )
            )  # fmt: skip
        assert await store.claim("acct_2", "live", "reg-1", "h", T0 + 1) is None
        # Another key (or none) cannot open it either: the request runs again, deduplicated downstream.
        for other in (SecretBox(parse_key(new_key())), SecretBox()):
            again = SqlIdempotencyStore(engine, other)
            assert await again.claim("acct_1", "live", "reg-1", "h", T0 + 2) is None
            await again.complete("acct_1", "live", "reg-1", 201, BODY, JSON)  # under its own key
        # The first store cannot open that one either: it runs again, and its answer replays.
        assert await store.claim("acct_1", "live", "reg-1", "h", T0 + 3) is None
        await store.complete("acct_1", "live", "reg-1", 201, BODY, JSON)
        assert await store.claim("acct_1", "live", "reg-1", "h", T0 + 4) == Stored(201, BODY, JSON)
    finally:
        await engine.dispose()


async def test_without_a_key_secrets_are_sealed_for_this_process_only(store: SqlIdempotencyStore) -> None:
    assert await store.claim("acct_1", "live", "reg-1", "h", T0) is None
    await store.complete("acct_1", "live", "reg-1", 201, BODY, JSON)
    assert SECRET not in "".join(await _stored_bodies(store))
    assert await store.claim("acct_1", "live", "reg-1", "h", T0 + 1) == Stored(201, BODY, JSON)
    # Another process (its own key) cannot open it: the retry runs again, deduplicated downstream.
    other = SqlIdempotencyStore(store.engine)
    assert await other.claim("acct_1", "live", "reg-1", "h", T0 + 2) is None
    # Bodies without a secret stay plain, so every process replays them.
    assert await store.claim("acct_1", "live", "k", "h", T0) is None
    await store.complete("acct_1", "live", "k", 200, '{"n": 1}', JSON)
    assert '{"n": 1}' in await _stored_bodies(store)
    assert await other.claim("acct_1", "live", "k", "h", T0 + 1) == Stored(200, '{"n": 1}', JSON)

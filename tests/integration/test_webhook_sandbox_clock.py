"""The sandbox clock at the storage port and the servicer, on SQLite and PostgreSQL: advancing moves the
account's sandbox deliveries waiting for a later attempt (never earlier than now), and leaves its live
deliveries, another account's, a leased one and one already due alone; the RPC refuses a live
environment and a span out of bounds, naming the field."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest
from google.protobuf import duration_pb2

from svckit.clock import FakeClock
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd._errors import InvalidRequest
from webhookd._repository import DeliveryFilter, DeliveryResult, EndpointRecord, EventRecord, SigningSecret
from webhookd._sender import Sender
from webhookd._service import WebhookService
from webhookd._sql import SqlRepository

T0 = dt.datetime(2026, 5, 1, 9, 0, 0, 654321, tzinfo=dt.UTC)
MIN, HOUR = dt.timedelta(minutes=1), dt.timedelta(hours=1)
ACCT, OTHER = "acct_clock", "acct_other"
# event id -> (account, environment, when its next attempt is due after a failed first attempt; None:
# claimed and still being sent, i.e. leased)
EVENTS: dict[str, tuple[str, str, dt.timedelta | None]] = {
    "evt_sbx_1m": (ACCT, "sandbox", MIN),
    "evt_sbx_6h": (ACCT, "sandbox", 6 * HOUR),
    "evt_sbx_due": (ACCT, "sandbox", dt.timedelta(0)),
    "evt_sbx_leased": (ACCT, "sandbox", None),
    "evt_live_1m": (ACCT, "live", MIN),
    "evt_live_6h": (ACCT, "live", 6 * HOUR),
    "evt_other_1m": (OTHER, "sandbox", MIN),
}


def _endpoint(account: str, env: str) -> EndpointRecord:
    url, secrets = "https://hooks.partner.test/h", [SigningSecret("whsec_" + "K" * 44)]
    return EndpointRecord(f"we_{account}_{env}", account, env, url, ["booking.confirmed"], "",
                          EndpointStatus.ENABLED, "", T0, T0, secrets)  # fmt: skip


@pytest.fixture
async def repo(db_url: str) -> AsyncIterator[SqlRepository]:
    """Every delivery of ``EVENTS`` attempted once at T0 and waiting for its next attempt (or leased)."""
    repo = await SqlRepository.open(db_url)
    try:
        for account, env in {(a, e) for a, e, _ in EVENTS.values()}:
            await repo.create_endpoint(_endpoint(account, env))
        for event_id, (account, env, _) in EVENTS.items():
            event = EventRecord(event_id, account, env, "booking.confirmed", "confirmed", T0, b"{}")
            assert (await repo.publish(event, "", T0))[1] == 1
        claims = await repo.claim_due(T0, 100, T0 + MIN, "wrk_t")
        assert len(claims) == len(EVENTS)
        results = [
            DeliveryResult(
                c.delivery.id, c.delivery.endpoint_id, None, DeliveryStatus.PENDING, T0 + wait, True
            )
            for c in claims
            if (wait := EVENTS[c.delivery.event_id][2]) is not None
        ]
        await repo.record_outcomes(results, "wrk_t", T0)
        yield repo
    finally:
        await repo.close()


async def _due(repo: SqlRepository) -> dict[str, dt.datetime | None]:
    """Each event's delivery: when it is due (its lease's expiry while leased)."""
    out: dict[str, dt.datetime | None] = {}
    for event_id in EVENTS:
        claim = await repo.get_claim(await _delivery_id(repo, event_id))
        assert claim is not None
        out[event_id] = claim.delivery.next_attempt_at
    return out


async def _delivery_id(repo: SqlRepository, event_id: str) -> str:
    account, env, _ = EVENTS[event_id]
    [delivery] = await repo.list_deliveries(DeliveryFilter(account, env, event_id=event_id), 10, None)
    return delivery.id


async def test_advancing_moves_the_accounts_sandbox_deliveries_only(repo: SqlRepository) -> None:
    before = await _due(repo)
    now = T0 + 10 * dt.timedelta(seconds=1)

    # 2 h: the 1 min retry becomes due now (not 2 h before it), the 6 h one 2 h earlier.
    assert await repo.advance_sandbox(ACCT, 2 * HOUR, now) == 2  # evt_sbx_1m, and evt_sbx_due as it was
    after = await _due(repo)
    assert after == {
        **before,
        "evt_sbx_1m": now,
        "evt_sbx_6h": T0 + 4 * HOUR,
    }
    assert after["evt_sbx_due"] == T0  # already due: not pushed back to now
    assert after["evt_live_1m"] == T0 + MIN and after["evt_live_6h"] == T0 + 6 * HOUR  # live: never
    assert after["evt_other_1m"] == T0 + MIN  # another account's: untouched

    # What became due is claimed now; nothing live is.
    claimed = {c.delivery.event_id for c in await repo.claim_due(now, 100, now + MIN, "wrk_u")}
    assert claimed == {"evt_sbx_1m", "evt_sbx_due"}

    # Again, 4 h: the 6 h retry is due; the claimed ones are leased and neither moved nor counted.
    assert await repo.advance_sandbox(ACCT, 4 * HOUR, now) == 1
    assert (await _due(repo))["evt_sbx_6h"] == now
    assert await repo.advance_sandbox(OTHER, dt.timedelta(seconds=1), now) == 0  # T0+1m is 50 s away
    assert (await _due(repo))["evt_other_1m"] == T0 + MIN - dt.timedelta(seconds=1)
    live = await repo.claim_due(now, 100, now + MIN, "wrk_v")
    assert {c.delivery.event_id for c in live} == {"evt_sbx_6h"}


def _request(
    env: pb.Environment.ValueType = pb.ENVIRONMENT_SANDBOX, seconds: int | None = 3600
) -> pb.AdvanceSandboxClockRequest:
    by = duration_pb2.Duration(seconds=seconds) if seconds is not None else None
    return pb.AdvanceSandboxClockRequest(account_id=ACCT, environment=env, by=by)


def _service(repo: SqlRepository, now: dt.datetime) -> WebhookService:
    """The servicer on ``repo`` at ``now``; the clock sends nothing itself (no client)."""
    return WebhookService(repo, FakeClock(now), Sender(None))  # type: ignore[arg-type]


REFUSED = {
    "live": (_request(env=pb.ENVIRONMENT_LIVE), "environment: only ENVIRONMENT_SANDBOX"),
    "unspecified environment": (_request(env=pb.ENVIRONMENT_UNSPECIFIED), "environment:"),
    "no span": (_request(seconds=None), "by: is required, between 1 second and 7 days"),
    "zero": (_request(seconds=0), "by: must be between 1 second and 7 days"),
    "negative": (_request(seconds=-60), "by: must be between 1 second and 7 days"),
    "over 7 days": (_request(seconds=7 * 86400 + 1), "by: must be between 1 second and 7 days"),
    "no account": (pb.AdvanceSandboxClockRequest(environment=pb.ENVIRONMENT_SANDBOX), "account_id:"),
}


@pytest.mark.parametrize(("request_", "message"), REFUSED.values(), ids=REFUSED.keys())
async def test_the_rpc_refuses_live_and_spans_out_of_bounds(
    repo: SqlRepository, request_: pb.AdvanceSandboxClockRequest, message: str
) -> None:
    before = await _due(repo)
    with pytest.raises(InvalidRequest, match=message):
        await _service(repo, T0 + MIN).AdvanceSandboxClock(request_, None)
    assert await _due(repo) == before  # nothing moved


async def test_the_rpc_advances_and_answers_what_is_due(repo: SqlRepository) -> None:
    service = _service(repo, T0 + 30 * dt.timedelta(seconds=1))
    resp = await service.AdvanceSandboxClock(_request(seconds=7 * 86400), None)
    assert resp.deliveries_due == 3  # the 1 min and 6 h retries, and the one already due; not the leased
    assert (await _due(repo))["evt_live_1m"] == T0 + MIN

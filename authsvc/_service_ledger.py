"""AuthService's mode A credit RPCs: holds (product services), the ledger and its entries (product services,
the edge, the portal), the limit, credits and warning level (operators). Rules: ``_ledger_rules``."""

from __future__ import annotations

import logging
import re

import grpc

from authsvc import _convert as cv
from authsvc import _validate as v
from authsvc._errors import InvalidRequest
from authsvc._ledger import EntryKind, HoldResult, Ledger, LedgerEntry
from authsvc._ledger_rules import HoldState
from authsvc._service_base import ServicerBase
from svckit.pages import BAD_PAGE_TOKEN, BadPageToken, page_parts, page_token
from svckit.protos import timestamp as ts
from svckit.prototables import AUTH_ENVIRONMENT, EnumTable
from svckit.vocabulary import Environment
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

HOLD_STATE = EnumTable(HoldState, pb.CreditHoldState, "CREDIT_HOLD_STATE_")
ENTRY_KIND = EnumTable(EntryKind, pb.LedgerEntryKind, "LEDGER_ENTRY_KIND_")
# The largest amount or limit accepted, in minor units (10^15: far above any credit, far below 2^63).
MAX_AMOUNT = 10**15
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_REFERENCE = re.compile(r"^[\x21-\x7e]+$")


def amount_of(value: int, field: str, *, minimum: int = 1) -> int:
    if not minimum <= value <= MAX_AMOUNT:
        raise InvalidRequest(f"{field}: must be between {minimum} and {MAX_AMOUNT} (minor units)")
    return value


def currency_of(value: str, *, required: bool = True) -> str:
    if not value and not required:
        return ""
    if not _CURRENCY.match(value):
        raise InvalidRequest("currency: an ISO 4217 code of three capital letters, e.g. EUR")
    return value


def reference_of(value: str, field: str) -> str:
    if not value or len(value) > v.MAX_BOOKING_REF or not _REFERENCE.match(value):
        raise InvalidRequest(f"{field}: 1 to {v.MAX_BOOKING_REF} printable ASCII characters, no spaces")
    return value


def ledger_pb(ledger: Ledger) -> pb.CreditLedger:
    b = ledger.balance
    out = pb.CreditLedger(
        account_id=ledger.account_id,
        environment=AUTH_ENVIRONMENT.pb(ledger.environment),
        currency=ledger.currency,
        credit_limit=b.limit,
        held=b.held,
        captured=b.captured,
        credits=b.credits,
        available=b.available,
        warning_level=b.warning_level,
        warning_level_default=b.warning_set is None,
        below_warning=ledger.below_warning,
    )
    if ledger.updated_at is not None:
        out.updated_at.CopyFrom(ts(ledger.updated_at))
    return out


def entry_pb(entry: LedgerEntry) -> pb.LedgerEntry:
    return pb.LedgerEntry(
        id=entry.id,
        account_id=entry.account_id,
        environment=AUTH_ENVIRONMENT.pb(entry.environment),
        kind=ENTRY_KIND.pb(entry.kind),
        reference=entry.reference,
        amount=entry.amount,
        available_after=entry.available_after,
        actor=pb.Actor(user=entry.actor_user, service=entry.actor_service),
        created_at=ts(entry.created_at),
        note=entry.note,
    )


def hold_pb(result: HoldResult) -> tuple[pb.CreditHold, pb.CreditLedger]:
    h = result.hold
    hold = pb.CreditHold(
        account_id=h.account_id,
        environment=AUTH_ENVIRONMENT.pb(h.environment),
        booking_ref=h.booking_ref,
        amount=h.amount,
        currency=h.currency,
        state=HOLD_STATE.pb(h.state),
        created_at=ts(h.created_at),
        updated_at=ts(h.updated_at),
    )
    return hold, ledger_pb(result.ledger)


def _where(account_id: str, environment: int) -> tuple[str, Environment]:
    return v.ident(account_id, "account_id", "acct"), cv.environment(environment)


class LedgerRpcs(ServicerBase):
    def _wake_outbox(self) -> None:
        if self.outbox_wakeup is not None:
            self.outbox_wakeup.set()  # a ledger.low_balance may have been queued

    # -- holds (product services) ----------------------------------------------------------------

    async def PlaceCreditHold(
        self, request: pb.PlaceCreditHoldRequest, context: grpc.aio.ServicerContext
    ) -> pb.PlaceCreditHoldResponse:
        account_id, env = _where(request.account_id, request.environment)
        ref = reference_of(request.booking_ref, "booking_ref")
        amount = amount_of(request.amount, "amount")
        currency = currency_of(request.currency)
        result = await self.repo.place_hold(account_id, env, ref, amount, currency, self.clock.now())
        if not result.replayed:
            self._wake_outbox()
        hold, ledger = hold_pb(result)
        return pb.PlaceCreditHoldResponse(hold=hold, ledger=ledger, replayed=result.replayed)

    async def _move(
        self, request: pb.CaptureCreditHoldRequest | pb.ReleaseCreditHoldRequest, target: HoldState
    ) -> HoldResult:
        account_id, env = _where(request.account_id, request.environment)
        ref = reference_of(request.booking_ref, "booking_ref")
        result = await self.repo.move_hold(account_id, env, ref, target, self.clock.now())
        if not result.replayed:
            self._wake_outbox()
        return result

    async def CaptureCreditHold(
        self, request: pb.CaptureCreditHoldRequest, context: grpc.aio.ServicerContext
    ) -> pb.CaptureCreditHoldResponse:
        result = await self._move(request, HoldState.CAPTURED)
        hold, ledger = hold_pb(result)
        return pb.CaptureCreditHoldResponse(hold=hold, ledger=ledger, replayed=result.replayed)

    async def ReleaseCreditHold(
        self, request: pb.ReleaseCreditHoldRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReleaseCreditHoldResponse:
        result = await self._move(request, HoldState.RELEASED)
        hold, ledger = hold_pb(result)
        return pb.ReleaseCreditHoldResponse(hold=hold, ledger=ledger, replayed=result.replayed)

    # -- reads -----------------------------------------------------------------------------------

    async def GetCreditLedger(
        self, request: pb.GetCreditLedgerRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCreditLedgerResponse:
        account_id, env = _where(request.account_id, request.environment)
        return pb.GetCreditLedgerResponse(ledger=ledger_pb(await self.repo.get_ledger(account_id, env)))

    async def ListLedgerEntries(
        self, request: pb.ListLedgerEntriesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListLedgerEntriesResponse:
        account_id, env = _where(request.account_id, request.environment)
        size = v.page_size(request.page_size)
        before = 0
        if request.page_token:
            try:
                before = int(page_parts(request.page_token, 1)[0])
            except (BadPageToken, ValueError):
                raise InvalidRequest(BAD_PAGE_TOKEN) from None
            if before <= 0:
                raise InvalidRequest(BAD_PAGE_TOKEN)
        rows = await self.repo.list_ledger_entries(account_id, env, size + 1, before)
        out = pb.ListLedgerEntriesResponse(entries=[entry_pb(e) for _seq, e in rows[:size]])
        if len(rows) > size:
            out.next_page_token = page_token(rows[size - 1][0])
        return out

    # -- operators -------------------------------------------------------------------------------

    async def SetCreditLimit(
        self, request: pb.SetCreditLimitRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetCreditLimitResponse:
        actor = self._actor(request.actor, context)
        account_id, env = _where(request.account_id, request.environment)
        limit = amount_of(request.credit_limit, "credit_limit", minimum=0)
        currency = currency_of(request.currency, required=False)
        ledger = await self.repo.set_credit_limit(account_id, env, limit, currency, actor, self.clock.now())
        self._wake_outbox()
        log.info(
            "credit limit set",
            extra={"account_id": account_id, "environment": env, "credit_limit": limit, "actor": actor.user},
        )
        return pb.SetCreditLimitResponse(ledger=ledger_pb(ledger))

    async def AddCredit(
        self, request: pb.AddCreditRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddCreditResponse:
        actor = self._actor(request.actor, context)
        account_id, env = _where(request.account_id, request.environment)
        amount = amount_of(request.amount, "amount")
        reference = reference_of(request.reference, "reference")
        note = v.text(request.note, "note", max_len=v.MAX_REASON)
        ledger, entry, replayed = await self.repo.add_credit(
            account_id, env, amount, reference, note, actor, self.clock.now()
        )
        if not replayed:
            log.info(
                "credit added",
                extra={"account_id": account_id, "environment": env, "amount": amount, "actor": actor.user},
            )
        return pb.AddCreditResponse(ledger=ledger_pb(ledger), entry=entry_pb(entry), replayed=replayed)

    async def SetCreditWarningLevel(
        self, request: pb.SetCreditWarningLevelRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetCreditWarningLevelResponse:
        actor = self._actor(request.actor, context)
        account_id, env = _where(request.account_id, request.environment)
        level = None if request.use_default else amount_of(request.warning_level, "warning_level", minimum=0)
        ledger = await self.repo.set_warning_level(account_id, env, level, actor, self.clock.now())
        self._wake_outbox()
        return pb.SetCreditWarningLevelResponse(ledger=ledger_pb(ledger))

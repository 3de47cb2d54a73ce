"""AuthService's account RPCs: accounts, travellers and the daily search allowance."""

from __future__ import annotations

import logging

import grpc

from authsvc import _convert as cv
from authsvc import _identity_rules as rules
from authsvc import _validate as v
from authsvc._errors import Forbidden, InvalidRequest
from authsvc._model import DEFAULT_DAILY_SEARCH_ALLOWANCE, Account, AccountMode, AccountStatus, KeyChange
from authsvc._service_base import ServicerBase, masked_changes
from svckit.ids import new_id
from svckit.peers import portal_user_var
from svckit.portal_calls import PORTAL_ACCOUNT_FIELDS
from svckit.prototables import ACCOUNT_MODE, ACCOUNT_STATUS
from svckit.vocabulary import Environment
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)


def allowance_of(value: int) -> int:
    """A daily search allowance as asked for: 0 means the service default."""
    if value < 0 or value > v.MAX_ALLOWANCE:
        raise InvalidRequest(f"daily_search_allowance: must be between 0 and {v.MAX_ALLOWANCE}")
    return value or DEFAULT_DAILY_SEARCH_ALLOWANCE


MAX_LOOK_TO_BOOK_TARGET = 1_000_000


def look_to_book_target_of(value: int) -> int:
    """A look-to-book target as asked for: searches per confirmed booking; 0 means none."""
    if value < 0 or value > MAX_LOOK_TO_BOOK_TARGET:
        raise InvalidRequest(f"look_to_book_target: must be between 0 and {MAX_LOOK_TO_BOOK_TARGET:,}")
    return value


class AccountRpcs(ServicerBase):
    async def CreateAccount(
        self, request: pb.CreateAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateAccountResponse:
        actor = self._actor(request.actor, context)
        name = v.text(request.name, "name", max_len=v.MAX_NAME, required=True)
        if request.mode == pb.ACCOUNT_MODE_UNSPECIFIED:
            mode = AccountMode.A
        else:
            try:
                mode = ACCOUNT_MODE.word(request.mode)
            except ValueError:
                raise InvalidRequest("mode: must be ACCOUNT_MODE_A or ACCOUNT_MODE_B") from None
        emails = v.emails(list(request.admin_emails))
        allowance = allowance_of(request.daily_search_allowance)
        now = self.clock.now()
        account = Account(
            id=new_id("acct"),
            name=name,
            mode=mode,
            status=AccountStatus.ACTIVE,
            admin_emails=emails,
            daily_search_allowance=allowance,
            created_at=now,
            updated_at=now,
        )
        await self.repo.create_account(account, actor)
        log.info("account created", extra={"account_id": account.id, "actor": actor.user})
        return pb.CreateAccountResponse(account=cv.account(account))

    async def GetAccount(
        self, request: pb.GetAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAccountResponse:
        account = await self.repo.get_account(v.ident(request.account_id, "account_id", "acct"))
        return pb.GetAccountResponse(account=cv.account(account))

    async def GetAlertRecipients(
        self, request: pb.GetAlertRecipientsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAlertRecipientsResponse:
        """The portal owners and admins and the extra addresses (``_identity_rules.alert_recipients``)."""
        account_id = v.ident(request.account_id, "account_id", "acct")
        account, members = await self.repo.account_users(account_id, rules.ALERT_ROLES)
        found = rules.alert_recipients(members, account.admin_emails)
        return pb.GetAlertRecipientsResponse(recipients=found.all, portal_recipients=found.portal)

    async def SetAccountStatus(
        self, request: pb.SetAccountStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetAccountStatusResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        try:
            status = ACCOUNT_STATUS.word(request.status)
        except ValueError:
            raise InvalidRequest(
                "status: must be ACCOUNT_STATUS_ACTIVE or ACCOUNT_STATUS_READ_ONLY"
            ) from None
        now = self.clock.now()
        account, changed = await self.repo.set_account_status(account_id, status, actor, now)
        if changed:
            self._changed(KeyChange("account_updated", "", account_id, now))
            log.info(
                "account status changed",
                extra={"account_id": account_id, "status": status, "actor": actor.user},
            )
        return pb.SetAccountStatusResponse(account=cv.account(account))

    async def UpdateAccount(
        self, request: pb.UpdateAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateAccountResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        if portal_user_var.get() is not None and not set(request.update_mask.paths) <= PORTAL_ACCOUNT_FIELDS:
            raise Forbidden("update_mask: the portal changes an account's alert addresses only")
        changes = masked_changes(
            request.update_mask,
            {
                "name": lambda: v.text(request.name, "name", max_len=v.MAX_NAME, required=True),
                "admin_emails": lambda: v.emails(list(request.admin_emails)),
                "daily_search_allowance": lambda: allowance_of(request.daily_search_allowance),
                "look_to_book_target": lambda: look_to_book_target_of(request.look_to_book_target),
            },
        )
        now = self.clock.now()
        account = await self.repo.update_account(account_id, changes, actor, now)
        self._changed(KeyChange("account_updated", "", account_id, now))
        log.info(
            "account updated",
            extra={"account_id": account_id, "fields": sorted(changes), "actor": actor.user},
        )
        return pb.UpdateAccountResponse(account=cv.account(account))

    async def ResolveTraveller(
        self, request: pb.ResolveTravellerRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResolveTravellerResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = cv.environment(request.environment)
        ref = v.partner_ref(request.partner_ref)
        trv, created = await self.repo.resolve_traveller(account_id, env, ref, self.clock.now())
        return pb.ResolveTravellerResponse(traveller_id=trv, created=created)

    async def DeleteTraveller(
        self, request: pb.DeleteTravellerRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTravellerResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = cv.environment(request.environment)
        ref = v.partner_ref(request.partner_ref)
        trv = await self.repo.delete_traveller(account_id, env, ref)
        log.info("traveller deleted", extra={"account_id": account_id, "traveller_id": trv})
        return pb.DeleteTravellerResponse(traveller_id=trv)

    # -- search allowance ------------------------------------------------------------------------

    async def ConsumeSearch(
        self, request: pb.ConsumeSearchRequest, context: grpc.aio.ServicerContext
    ) -> pb.ConsumeSearchResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        if request.key_id:
            key = await self.repo.get_key(v.ident(request.key_id, "key_id", "key"))
            if key.account_id != account_id:
                raise InvalidRequest("key_id: the key belongs to another account")
            env = key.environment
            if (
                request.environment != pb.ENVIRONMENT_UNSPECIFIED
                and cv.environment(request.environment) != env
            ):
                raise InvalidRequest("environment: differs from the key's environment")
        else:
            env = cv.environment(request.environment)
        count = request.count or 1
        if count < 1 or count > v.MAX_SEARCH_COUNT:
            raise InvalidRequest(f"count: must be between 1 and {v.MAX_SEARCH_COUNT}")
        now = self.clock.now()
        day = v.day("", now)
        if env == Environment.SANDBOX:
            return pb.ConsumeSearchResponse(
                counted=False, usage=cv.usage(await self.repo.get_usage(account_id, day))
            )
        used = await self.repo.consume_search(account_id, env, day, count, now)
        if self.outbox_wakeup is not None:
            self.outbox_wakeup.set()  # a threshold event may have been queued
        return pb.ConsumeSearchResponse(counted=True, usage=cv.usage(used))

    async def GetUsage(
        self, request: pb.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetUsageResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        day = v.day(request.date, self.clock.now())
        return pb.GetUsageResponse(usage=cv.usage(await self.repo.get_usage(account_id, day)))

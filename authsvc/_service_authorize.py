"""AuthService's Authenticate and Authorize: the hot path, with its answers kept for reuse."""

from __future__ import annotations

import datetime as dt
import logging
from time import monotonic

import grpc

from authsvc import _convert as cv
from authsvc._decision import AccessRequest, Credential, Decision, authorize, reusable
from authsvc._errors import InvalidApiKey, InvalidRequest, MissingApiKey
from authsvc._keys import environment_of
from authsvc._metrics import KEY_CACHE
from authsvc._model import KeyGrant, KeyStatus
from authsvc._service_answers import (
    TOUCH_INTERVAL,
    Answer,
    decisions_of,
    duration_of,
    shape_of,
)
from authsvc._service_base import ServicerBase
from svckit.allowlist import parse_source
from svckit.apikeys import INVALID_API_KEY_MESSAGE
from svckit.logs import redact
from svckit.scopes import is_scope
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

_KEPT = KEY_CACHE.labels("kept")
# A key in these states is no key: it answers invalid_api_key and records no use.
_UNUSABLE = (KeyStatus.REVOKED, KeyStatus.EXPIRED)


class AuthenticationRpcs(ServicerBase):
    async def Authenticate(
        self, request: pb.AuthenticateRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuthenticateResponse:
        if not request.api_key:
            raise MissingApiKey("api_key: no API key provided")
        if environment_of(request.api_key) is None:
            raise InvalidApiKey(INVALID_API_KEY_MESSAGE)
        grant = await self._grant(request.api_key)
        now = self.clock.now()
        if grant is None:
            raise InvalidApiKey(INVALID_API_KEY_MESSAGE)
        status = grant.key.status(now)
        if status in _UNUSABLE:
            raise InvalidApiKey(f"Invalid API key provided: the key was {status}.")
        self.last_used.touch(grant.key.id, now)
        return pb.AuthenticateResponse(key=self._key_pb(grant.key, now), account=cv.account(grant.account))

    async def Authorize(
        self, request: pb.AuthorizeRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuthorizeResponse:
        shape = shape_of(request)
        kept = self._answers.get(shape)
        if kept is not None and kept.generation == self.cache.generation:
            t = monotonic()
            if t < kept.until:
                _KEPT.inc()
                if t < kept.touch_at:
                    kept.counted.inc()
                    return kept.stamped  # type: ignore[return-value]
                return self._reply(kept, self.clock.now(), t)
        # Read before any look-up: an answer decided across a key change must not be kept (as KeyCache.put).
        generation = self.cache.generation
        env = cv.environment(request.environment)
        if request.required_scope and not is_scope(request.required_scope):
            raise InvalidRequest(f"required_scope: unknown scope {redact(request.required_scope[:40])!r}")
        if request.source_address and parse_source(request.source_address) is None:
            raise InvalidRequest("source_address: not an IP address")
        secret = request.api_key
        grant: KeyGrant | None = None
        if not secret:
            credential = Credential.MISSING
        elif environment_of(secret) is None:
            credential = Credential.MALFORMED
        else:
            credential = Credential.WELL_FORMED
            grant = await self._grant(secret)
        now = self.clock.now()
        access = AccessRequest(
            env, request.required_scope, request.source_address, request.is_write, credential
        )
        decision: Decision = authorize(grant, access, now)
        answer = Answer(
            grant,
            decision,
            self._response(decision, grant, now),
            decisions_of(decision.allowed, decision.error_type),
        )
        if grant is not None and reusable(grant) and self.hub.hearing:
            answer.generation, answer.until = generation, monotonic() + self.cache.ttl
            self._answers[shape] = answer
        return self._reply(answer, now, monotonic())

    def _response(self, decision: Decision, grant: KeyGrant | None, now: dt.datetime) -> pb.AuthorizeResponse:
        """The answer to Authorize but the key's last use, which ``_reply`` adds."""
        out = pb.AuthorizeResponse(
            decision=pb.DECISION_ALLOW if decision.allowed else pb.DECISION_DENY,
            error_type=decision.error_type,
            error_message=decision.error_message,
            cache_ttl=duration_of(decision.cache_ttl),
        )
        if grant is not None:
            out.key.CopyFrom(cv.api_key(grant.key, now))
            out.account.CopyFrom(cv.account(grant.account))
        return out

    def _reply(self, answer: Answer, now: dt.datetime, t: float) -> pb.AuthorizeResponse:
        """``answer`` with the key's last use before this call; this call recorded as a use.

        The message returned is shared by every call that shows the same last use: nothing changes it after
        it is made, and grpc serialises it as the handler returns."""
        decision, grant = answer.decision, answer.grant
        seen = None
        if grant is not None:
            key = grant.key
            seen = self._newer_use(key)  # else the stored use, which the response already has
            if key.status(now) not in _UNUSABLE:
                self.last_used.touch(key.id, now)
        answer.touch_at = t + TOUCH_INTERVAL
        out = answer.stamped
        if out is None or answer.shown_use != seen:
            out = pb.AuthorizeResponse()
            out.CopyFrom(answer.response)
            if seen is not None:
                out.key.last_used_at.FromDatetime(seen)
            answer.shown_use, answer.stamped = seen, out
        answer.counted.inc()
        if not decision.allowed:
            log.debug(
                "authorize denied",
                extra={"error_type": decision.error_type, "key_id": grant.key.id if grant else ""},
            )
        return out

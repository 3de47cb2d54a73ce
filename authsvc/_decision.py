"""The authorisation decision: one pure function, no I/O (spec §5, decisions.md error table).

Rules, in order (the first that fails answers):
  1. no key presented                                  -> missing_api_key
  2. malformed (prefix/length/alphabet/checksum) key   -> invalid_api_key
  3. unknown key                                       -> invalid_api_key
  4. revoked key                                       -> invalid_api_key
  5. expired key (rotated out and past its expiry)     -> invalid_api_key
     (2-5 with one message: the caller learns nothing about which keys exist or existed)
  6. key environment differs from the host's           -> environment_mismatch
  7. source outside a non-empty allow list             -> ip_not_allowed
  8. key lacks the required scope (message names it)   -> missing_scope
  9. business write on a read-only account             -> account_read_only
     (a product's :write -- bookings, orders, changes, cancellations, spend; see business_write)
  otherwise allow.
An answer may be cached for at most 60 s and never past the key's expiry.

``reusable`` says when authsvc may keep an answer and give it again for the same key and request.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from authsvc._model import KeyGrant
from svckit.allowlist import source_allowed
from svckit.apikeys import INVALID_API_KEY_MESSAGE
from svckit.resources import WRITABLE_WHEN_READ_ONLY
from svckit.vocabulary import AccountStatus, Environment

MAX_CACHE_TTL = 60.0
# What a read-only account (after an unattended failed settlement charge) may still change is the
# resource table's (svckit.resources, ``writable_when_read_only``, each with why): its travellers' records
# (account:write) and its webhook endpoints (webhooks:write). Writes of every other resource are business.


def business_write(required_scope: str, is_write: bool) -> bool:
    """Is this write business (a booking, order, change, cancellation or spend), which a read-only account
    may not do? Writes of a resource the table marks writable when read-only are not."""
    return is_write and required_scope.split(":", 1)[0] not in WRITABLE_WHEN_READ_ONLY


class Credential(enum.Enum):
    MISSING = "missing"
    MALFORMED = "malformed"
    WELL_FORMED = "well_formed"


@dataclasses.dataclass(frozen=True, slots=True)
class AccessRequest:
    environment: Environment
    required_scope: str
    source_address: str
    is_write: bool
    credential: Credential = Credential.WELL_FORMED


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    error_type: str = ""
    error_message: str = ""
    cache_ttl: float = 0.0


def _ttl(grant: KeyGrant | None, now: dt.datetime) -> float:
    if grant is None or grant.key.expires_at is None:
        return MAX_CACHE_TTL
    left = (grant.key.expires_at - now).total_seconds()
    return max(0.0, min(MAX_CACHE_TTL, left))


def _deny(error_type: str, message: str, ttl: float) -> Decision:
    return Decision(False, error_type, message, ttl)


def reusable(grant: KeyGrant) -> bool:
    """May the decision for ``grant`` and a request be kept and given again for the same request?

    Only when time cannot change it: a key never revoked and with no expiry (not rotated out) is
    decided the same way, with the same ``cache_ttl`` and the same status, whatever ``now`` is. Everything
    else the decision reads (the key, its account, the allow list) can change only through a key or
    account change, which invalidates the key cache, so a kept answer is given only while the cache's
    generation is the one it was decided in. A revoked or expiring key is decided afresh on every call."""
    return grant.key.revoked_at is None and grant.key.expires_at is None


def authorize(grant: KeyGrant | None, request: AccessRequest, now: dt.datetime) -> Decision:
    if request.credential is Credential.MISSING:
        return _deny(
            "missing_api_key", "No API key provided. Send it as 'Authorization: Svc <API_KEY>'.", 0.0
        )
    if request.credential is Credential.MALFORMED or grant is None:
        return _deny("invalid_api_key", INVALID_API_KEY_MESSAGE, MAX_CACHE_TTL)
    key, account = grant.key, grant.account
    if (key.revoked_at is not None and key.revoked_at <= now) or (
        key.expires_at is not None and key.expires_at <= now
    ):
        return _deny("invalid_api_key", INVALID_API_KEY_MESSAGE, MAX_CACHE_TTL)
    ttl = _ttl(grant, now)
    if key.environment != request.environment:
        prefix = key.hint.partition("...")[0]  # the key's own brand (svckit.apikeys)
        if key.environment == Environment.SANDBOX:
            msg = f"A test key ({prefix}) was used on the live host; use it on the sandbox host."
        else:
            msg = f"A live key ({prefix}) was used on the sandbox host; use a test key there."
        return _deny("environment_mismatch", msg, ttl)
    if not source_allowed(request.source_address, grant.networks):
        shown = request.source_address or "an unknown address"
        return _deny("ip_not_allowed", f"Requests from {shown} are not allowed for this API key.", ttl)
    if request.required_scope and request.required_scope not in key.scopes:
        return _deny(
            "missing_scope",
            f"This API key lacks the scope {request.required_scope} required for this request.",
            ttl,
        )
    if account.status == AccountStatus.READ_ONLY and business_write(request.required_scope, request.is_write):
        return _deny(
            "account_read_only",
            "The account is read-only after a failed settlement charge: bookings, orders, changes and "
            "spending are refused until it is settled (travellers' records and webhooks still work).",
            ttl,
        )
    return Decision(True, cache_ttl=ttl)

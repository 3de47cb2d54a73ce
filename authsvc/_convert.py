"""Model <-> protobuf conversions."""

from __future__ import annotations

import datetime as dt

from authsvc._errors import InvalidRequest
from authsvc._model import Account, ApiKey, AuditEvent, KeyChange, Usage
from svckit.protos import struct
from svckit.protos import timestamp as ts
from svckit.prototables import ACCOUNT_MODE, ACCOUNT_STATUS, AUTH_ENVIRONMENT, KEY_STATUS
from svckit.vocabulary import Environment
from travel.auth.v1 import auth_pb2 as pb

# Key change kinds have no word in svckit.vocabulary: they are authsvc's own.
CHANGE_TO_PB = {
    "sync": pb.KEY_CHANGE_KIND_SYNC,
    "revoked": pb.KEY_CHANGE_KIND_REVOKED,
    "rotated": pb.KEY_CHANGE_KIND_ROTATED,
    "updated": pb.KEY_CHANGE_KIND_UPDATED,
    "account_updated": pb.KEY_CHANGE_KIND_ACCOUNT_UPDATED,
}


def environment(value: int, field: str = "environment") -> Environment:
    """The environment of a request's proto number; InvalidRequest for UNSPECIFIED or an unknown one."""
    try:
        return AUTH_ENVIRONMENT.word(value)
    except ValueError:
        raise InvalidRequest(f"{field}: must be ENVIRONMENT_LIVE or ENVIRONMENT_SANDBOX") from None


def account(a: Account) -> pb.Account:
    return pb.Account(
        id=a.id,
        name=a.name,
        mode=ACCOUNT_MODE.pb(a.mode),
        status=ACCOUNT_STATUS.pb(a.status),
        admin_emails=list(a.admin_emails),
        daily_search_allowance=a.daily_search_allowance,
        created_at=ts(a.created_at),
        updated_at=ts(a.updated_at),
        look_to_book_target=a.look_to_book_target,
        require_certification=a.require_certification,
        certification=pb.AccountCertification(
            certified_at=ts(a.certified_at) if a.certified_at else None,
            open_run_id=a.open_run_id,
            open_run_key_id=a.open_run_key_id,
            open_run_ends_at=ts(a.open_run_ends_at) if a.open_run_ends_at else None,
            fault_every=a.fault_every,
        ),
    )


def api_key(k: ApiKey, now: dt.datetime) -> pb.ApiKey:
    return pb.ApiKey(
        id=k.id,
        account_id=k.account_id,
        environment=AUTH_ENVIRONMENT.pb(k.environment),
        name=k.name,
        scopes=list(k.scopes),
        allowed_sources=list(k.allowed_sources),
        hint=k.hint,
        status=KEY_STATUS.pb(k.status(now)),
        created_at=ts(k.created_at),
        expires_at=ts(k.expires_at),
        revoked_at=ts(k.revoked_at),
        last_used_at=ts(k.last_used_at),
        rotated_to_key_id=k.rotated_to_key_id,
        rotated_from_key_id=k.rotated_from_key_id,
        rate_limit=k.rate_limit,
        rotated_at=ts(k.rotated_at),
    )


def audit_event(e: AuditEvent) -> pb.AuditEvent:
    return pb.AuditEvent(
        id=e.id,
        account_id=e.account_id,
        key_id=e.key_id,
        action=e.action,
        actor=pb.Actor(
            user=e.actor.user,
            source_address=e.actor.source_address,
            user_id=e.actor.user_id,
            service=e.actor.service,
        ),
        occurred_at=ts(e.occurred_at),
        before=struct(e.before),
        after=struct(e.after),
    )


def usage(u: Usage) -> pb.Usage:
    return pb.Usage(
        date=u.date,
        searches_used=u.searches_used,
        daily_search_allowance=u.daily_search_allowance,
        remaining=u.remaining,
    )


def change(c: KeyChange) -> pb.WatchKeyChangesResponse:
    return pb.WatchKeyChangesResponse(
        kind=CHANGE_TO_PB[c.kind], key_id=c.key_id, account_id=c.account_id, changed_at=ts(c.changed_at)
    )

"""The portal's certificate acts only for its signed-in user (svckit.portal_calls), over mutual TLS against
real authsvc and webhookd servers: without a session (or with an unknown one) every RPC but the sign-in
flows is refused; with a session of account A, a request naming account B or B's key is refused, the
actor is the session's user whatever the request names, and what is not the portal's stays refused."""

from __future__ import annotations

import datetime as dt
import pathlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf import descriptor_pool, field_mask_pb2, struct_pb2
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc

from authsvc._server import AuthServer
from authsvc.testing import ACTOR
from svckit.clients import AuthClient, ClientError, HooksClient
from svckit.clients.interceptors import session_token_var
from svckit.portal_calls import PORTAL_CALLS, SESSION_HEADER, needs_session
from svckit.protos import timestamp as ts
from tests.support import event_data, tls_of
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from webhookd._server import Config, Webhookd, run_server

PASSWORD = "a long enough passphrase"


@dataclass
class Portal:
    auth: AuthClient
    hooks: HooksClient
    admin: AuthClient
    a: str  # account ids
    b: str
    token: str  # a session of an owner of account A
    b_key: str  # a key of account B


@pytest.fixture
async def webhookd_with_authsvc(
    tmp_path: pathlib.Path, pki: pathlib.Path, authsvc: AuthServer
) -> AsyncIterator[Webhookd]:
    config = Config(
        database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
        listen="127.0.0.1:0",
        tls=tls_of(pki, "webhookd"),
        authsvc=f"127.0.0.1:{authsvc.port}",
    )
    app = await run_server(config, start_worker=False)
    try:
        yield app
    finally:
        await app.stop(0)


@pytest.fixture
async def portal(
    authsvc: AuthServer, webhookd_with_authsvc: Webhookd, pki: pathlib.Path
) -> AsyncIterator[Portal]:
    auth_at, hooks_at = f"127.0.0.1:{authsvc.port}", f"127.0.0.1:{webhookd_with_authsvc.port}"
    async with (
        AuthClient(auth_at, tls_of(pki, "svcctl")) as admin,
        AuthClient(auth_at, tls_of(pki, "portal")) as auth,
        HooksClient(hooks_at, tls_of(pki, "portal")) as hooks,
    ):
        a = (await admin.create_account(pb.CreateAccountRequest(name="A", actor=ACTOR))).account.id
        b = (await admin.create_account(pb.CreateAccountRequest(name="B", actor=ACTOR))).account.id
        b_key = await admin.create_key(
            pb.CreateKeyRequest(
                account_id=b, environment=pb.ENVIRONMENT_LIVE, scopes=["account:read"], actor=ACTOR
            )
        )
        invite = await admin.create_invite(
            ipb.CreateInviteRequest(
                account_id=a, email="owner@a.example", role=ipb.USER_ROLE_OWNER, actor=ACTOR
            )
        )
        # Accepting an invitation is one of the flows the portal's certificate makes on its own.
        accepted = await auth.accept_invite(ipb.AcceptInviteRequest(token=invite.token, password=PASSWORD))
        yield Portal(auth, hooks, admin, a, b, accepted.session_token, b_key.key.id)


@pytest.fixture
def as_owner(portal: Portal) -> Iterator[None]:
    """The portal's calls carry the owner's session, as its request handling sets it."""
    reset = session_token_var.set(portal.token)
    yield
    session_token_var.reset(reset)


def usage_of(account_id: str, anonymous: bool = False) -> pb.QueryUsageCountsRequest:
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    ask = pb.QueryUsageCountsRequest(account_id=account_id, anonymous=anonymous, to=ts(hour))
    getattr(ask, "from").CopyFrom(ts(hour - dt.timedelta(hours=1)))
    return ask


def _request_class(method: str) -> type:
    service, name = method.split("/")
    found = descriptor_pool.Default().FindServiceByName(service).methods_by_name[name]
    return GetMessageClass(found.input_type)


async def _code(channel: grpc.aio.Channel, method: str, request: object, token: str) -> grpc.StatusCode:
    call = channel.unary_unary(
        "/" + method,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=lambda b: b,
    )
    try:
        await call(request, metadata=((SESSION_HEADER, token),) if token else None, timeout=10)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("token", ["", "ps_not-a-session"])
async def test_without_a_session_every_operator_rpc_is_refused(portal: Portal, token: str) -> None:
    """Each RPC of the portal's list but the sign-in flows, with the portal's certificate and no or an
    unknown session, naming account A: refused before it runs, on authsvc and webhookd alike."""
    refused = {}
    for method in sorted(m for m in PORTAL_CALLS if needs_session(m)):
        channel = portal.hooks.channel if method.startswith("travel.webhooks") else portal.auth.channel
        request = _request_class(method)()
        if "account_id" in request.DESCRIPTOR.fields_by_name:
            request.account_id = portal.a
        refused[method] = await _code(channel, method, request, token)
    assert set(refused.values()) == {grpc.StatusCode.UNAUTHENTICATED}, refused
    assert any(m.startswith("travel.webhooks") for m in refused)


async def test_grpc_health_is_open_to_the_portal_without_a_session(portal: Portal) -> None:
    """The portal's /readyz asks both peers' gRPC health with its certificate alone: health (like
    reflection) is open to every peer and names no account, so it needs no signed-in user."""
    for channel in (portal.auth.channel, portal.hooks.channel):
        answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_an_owner_invite_needs_the_session_and_stays_in_its_account(
    portal: Portal, as_owner: None
) -> None:
    """The reported attack: an owner invite into another account, with or without a session."""
    owner = ipb.USER_ROLE_OWNER
    with pytest.raises(ClientError) as refused:
        await portal.auth.create_invite(
            ipb.CreateInviteRequest(account_id=portal.b, email="m@evil.example", role=owner, actor=ACTOR)
        )
    assert refused.value.type == "forbidden"
    # With no account named (the operator's path before), the invite is the session's account's.
    made = await portal.auth.create_invite(
        ipb.CreateInviteRequest(email="new@a.example", role=owner, actor=ACTOR)
    )
    assert made.invite.account_id == portal.a


async def test_account_b_and_its_keys_are_out_of_reach_of_a_session_of_a(
    portal: Portal, as_owner: None
) -> None:
    live = pb.ENVIRONMENT_LIVE
    calls = {
        "CreateKey": portal.auth.create_key(
            pb.CreateKeyRequest(account_id=portal.b, environment=live, scopes=["account:read"], actor=ACTOR)
        ),
        "ListKeys": portal.auth.list_keys(pb.ListKeysRequest(account_id=portal.b)),
        "GetAccount": portal.auth.get_account(pb.GetAccountRequest(account_id=portal.b)),
        "GetKey": portal.auth.get_key(pb.GetKeyRequest(key_id=portal.b_key)),
        "RevokeKey": portal.auth.revoke_key(
            pb.RevokeKeyRequest(key_id=portal.b_key, reason="x", actor=ACTOR)
        ),
        "RotateKey": portal.auth.rotate_key(pb.RotateKeyRequest(key_id=portal.b_key, actor=ACTOR)),
        "RecordAuditEvent": portal.auth.record_audit_event(
            ipb.RecordAuditEventRequest(
                account_id=portal.b,
                actor=ACTOR,
                action="webhook_endpoint.deleted",
                before=struct_pb2.Struct(),
            )
        ),
        "ListEndpoints": portal.hooks.list_endpoints(wpb.ListEndpointsRequest(account_id=portal.b)),
        "RegisterEndpoint": portal.hooks.register_endpoint(
            wpb.RegisterEndpointRequest(
                account_id=portal.b, environment=wpb.ENVIRONMENT_SANDBOX, url="https://x.example/h"
            )
        ),
        # Insights: another account's usage, events and deliveries; the counts of no account at all.
        "QueryUsageCounts": portal.auth.query_usage_counts(usage_of(portal.b)),
        "QueryUsageCounts anonymous": portal.auth.query_usage_counts(usage_of("", anonymous=True)),
        "CountEvents": portal.hooks.count_events(
            wpb.CountEventsRequest(
                account_id=portal.b,
                environment=wpb.ENVIRONMENT_LIVE,
                type="booking.confirmed",
                since=ts(dt.datetime.now(dt.UTC) - dt.timedelta(days=1)),
            )
        ),
        "QueryDeliveryCounts": portal.hooks.query_delivery_counts(
            wpb.QueryDeliveryCountsRequest(account_id=portal.b, environment=wpb.ENVIRONMENT_LIVE)
        ),
        # The look-to-book target is the operators' (the contract's), not the partner's.
        "UpdateAccount look_to_book_target": portal.auth.update_account(
            pb.UpdateAccountRequest(
                account_id=portal.a,
                update_mask=field_mask_pb2.FieldMask(paths=["look_to_book_target"]),
                look_to_book_target=10**6,
                actor=ACTOR,
            )
        ),
        # Not the portal's at all, whoever is signed in.
        "PublishEvent": portal.hooks.publish_event(
            wpb.PublishEventRequest(
                account_id=portal.a,
                environment=wpb.ENVIRONMENT_LIVE,
                type="booking.confirmed",
                data=event_data("booking.confirmed"),
            )
        ),
        # The portal changes an account's alert addresses, never its search allowance.
        "UpdateAccount": portal.auth.update_account(
            pb.UpdateAccountRequest(
                account_id=portal.a,
                update_mask=field_mask_pb2.FieldMask(paths=["daily_search_allowance"]),
                daily_search_allowance=10**6,
                actor=ACTOR,
            )
        ),
    }
    got = {}
    for name, call in calls.items():
        try:
            await call
            got[name] = "ok"
        except ClientError as exc:
            got[name] = exc.type
    expected = dict.fromkeys(calls, "forbidden")
    expected.update(dict.fromkeys(("GetKey", "RevokeKey", "RotateKey"), "not_found"))  # as an unknown key
    expected["PublishEvent"] = "internal_error"  # the allow list's refusal (docs/architecture.md)
    assert got == expected
    key = await portal.admin.get_key(pb.GetKeyRequest(key_id=portal.b_key))
    assert key.key.status == pb.KEY_STATUS_ACTIVE


async def test_the_actor_is_the_sessions_user_whatever_the_request_names(
    portal: Portal, as_owner: None
) -> None:
    made = await portal.auth.create_key(
        pb.CreateKeyRequest(
            account_id=portal.a,
            environment=pb.ENVIRONMENT_SANDBOX,
            scopes=["account:read"],
            actor=pb.Actor(user="ops:someone-else"),
        )
    )
    audit = await portal.admin.list_audit_events(
        pb.ListAuditEventsRequest(account_id=portal.a, key_id=made.key.id)
    )
    assert [e.actor.user for e in audit.events] == ["owner@a.example"]
    # webhookd resolves the same session through authsvc and answers for account A.
    listed = await portal.hooks.list_endpoints(
        wpb.ListEndpointsRequest(account_id=portal.a, environment=wpb.ENVIRONMENT_SANDBOX)
    )
    assert list(listed.endpoints) == []

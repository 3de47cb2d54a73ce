"""``ReceiverAuth`` from and to its proto: what RegisterEndpoint and UpdateEndpoint accept (checked: the
token URL like an endpoint URL, an uploaded certificate, the headers) and what every answer shows (never
a secret)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from svckit.webhook_status import DestinationType
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd._client_tls import PlatformCa, check_uploaded
from webhookd._errors import Conflict, InvalidRequest, UnsafeTarget
from webhookd._receiver_auth import (
    MAX_AUDIENCE,
    MAX_CLIENT_ID,
    MAX_CLIENT_SECRET,
    MAX_SCOPE,
    ClientCertificate,
    OAuth2Credentials,
    ReceiverAuth,
    checked_headers,
)
from webhookd._repository import EndpointRecord
from webhookd._ssrf import Policy, Resolver, check_url, resolve_checked

_CERT = "receiver_auth.client_certificate"
_OAUTH = "receiver_auth.oauth2"


def _text(value: str, name: str, limit: int, *, required: bool = False) -> str:
    if required and not value:
        raise InvalidRequest(f"{name}: is required")
    if len(value) > limit or not value.isprintable():
        raise InvalidRequest(f"{name}: at most {limit} printable characters")
    return value


def _certificate(
    msg: pb.ClientCertificate,
    account_id: str,
    current: ClientCertificate | None,
    ca: PlatformCa | None,
    now: dt.datetime,
) -> ClientCertificate:
    uploaded = bool(msg.certificate_pem or msg.private_key_pem)
    if current is not None and msg.sha256_fingerprint and not uploaded:
        if msg.sha256_fingerprint != current.fingerprint:
            raise InvalidRequest(f"{_CERT}.sha256_fingerprint: is not the endpoint's current certificate's")
        return current  # echoed back: kept
    if msg.issued_by_platform:
        if uploaded:
            raise InvalidRequest(f"{_CERT}: either issued_by_platform or an upload, not both")
        if ca is None:
            raise InvalidRequest(f"{_CERT}.issued_by_platform: this platform issues no client certificates")
        return ca.issue(account_id, now)
    return check_uploaded(msg.certificate_pem, msg.private_key_pem, now)


async def _oauth2(
    msg: pb.OAuth2ClientCredentials, current: OAuth2Credentials | None, policy: Policy, resolver: Resolver
) -> OAuth2Credentials:
    url = _text(msg.token_url, f"{_OAUTH}.token_url", 2048, required=True)
    target = check_url(url, policy, f"{_OAUTH}.token_url")
    try:
        await resolve_checked(target.host, target.port, policy, resolver)
    except UnsafeTarget as exc:
        raise UnsafeTarget(exc.message.replace("url:", f"{_OAUTH}.token_url:", 1)) from None
    secret = msg.client_secret
    if not secret and current is not None:
        secret = current.client_secret  # empty on an update: kept
    return OAuth2Credentials(
        token_url=url,
        client_id=_text(msg.client_id, f"{_OAUTH}.client_id", MAX_CLIENT_ID, required=True),
        client_secret=_text(secret, f"{_OAUTH}.client_secret", MAX_CLIENT_SECRET, required=True),
        scope=_text(msg.scope, f"{_OAUTH}.scope", MAX_SCOPE),
        audience=_text(msg.audience, f"{_OAUTH}.audience", MAX_AUDIENCE),
    )


async def receiver_auth_of(
    service: Any,
    request: Any,
    endpoint: EndpointRecord,
    new_type: DestinationType | None = None,
    update: bool = False,
) -> ReceiverAuth | None:
    """The request's ``receiver_auth`` for ``endpoint`` (its current one the base of an update), checked;
    None when unset or empty. Only an http endpoint (``new_type``: the type an update gives it) has one:
    a registration or an update that makes it another type is invalid_request, an ``update`` that leaves a
    polling or broker endpoint as it is a conflict (the request is fine, the endpoint's state is not).
    ``service``: the WebhookService (its policy, resolver, clock, and its HTTP sender's platform CA)."""
    if not request.HasField("receiver_auth"):
        return None
    msg: pb.ReceiverAuth = request.receiver_auth
    kind = new_type or endpoint.destination_type
    if kind is not DestinationType.HTTP and msg.ByteSize():
        if new_type is None and update:  # the request is valid; the endpoint it changes is not http
            raise Conflict(
                f"receiver_auth: endpoint {endpoint.id} is a {kind} endpoint and only http endpoints have "
                "one; make it http (type and url) in the same update"
            )
        raise InvalidRequest(f"receiver_auth: only http endpoints have one, not {kind} ones")
    current = endpoint.receiver_auth
    now = service.clock.now()
    mtls = oauth2 = None
    if msg.HasField("client_certificate"):
        base = current.mtls if current is not None else None
        mtls = _certificate(
            msg.client_certificate, endpoint.account_id, base, service.destinations.sender.client_ca, now
        )
    if msg.HasField("oauth2"):
        base_o = current.oauth2 if current is not None else None
        oauth2 = await _oauth2(msg.oauth2, base_o, service.policy, service.resolver)
    auth = ReceiverAuth(endpoint.id, mtls, oauth2, checked_headers(dict(msg.headers)))
    return None if auth.empty else auth


def receiver_auth_pb(auth: ReceiverAuth | None) -> pb.ReceiverAuth | None:
    """What an answer shows: no private key, no client secret."""
    if auth is None:
        return None
    out = pb.ReceiverAuth(headers=dict(auth.headers))
    if auth.mtls is not None:
        c = auth.mtls
        out.client_certificate.issued_by_platform = c.issued_by_platform
        out.client_certificate.certificate_pem = c.cert_pem
        out.client_certificate.sha256_fingerprint = c.fingerprint
        out.client_certificate.not_after.FromDatetime(c.not_after)
        out.client_certificate.subject = c.subject
    if auth.oauth2 is not None:
        o = auth.oauth2
        out.oauth2.CopyFrom(
            pb.OAuth2ClientCredentials(
                token_url=o.token_url, client_id=o.client_id, scope=o.scope, audience=o.audience
            )
        )
    return out

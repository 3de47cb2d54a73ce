"""Webhook operations in the account's audit trail: webhookd does them, authsvc records them."""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import Counter

from portal.context import PortalRequest, auth
from portal.receiver_auth_form import receiver_auth_summary
from portal.web import env_of, viewer_of
from portal.webhook_destinations import destination_label
from portal.webhook_views import ordering_word, payload_word, scheme_word
from svckit.clients import ClientError
from svckit.protos import struct
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb

log = logging.getLogger("portal")
AUDIT_FAILURES = Counter(
    "portal_audit_failures_total", "Webhook operations done whose audit record authsvc did not take"
)


def endpoint_fields(endpoint: wpb.Endpoint) -> dict[str, Any]:
    """What the audit trail records of an endpoint (never its signing secret, a client certificate's key
    or an OAuth2 client secret, which it does not hold)."""
    return {
        "url": endpoint.url,
        "events": list(endpoint.events),
        "description": endpoint.description,
        "signature_scheme": scheme_word(endpoint.signature_scheme),
        "ordering": ordering_word(endpoint.ordering),
        "filter": endpoint.filter_json,
        "payload": payload_word(endpoint.payload),
        "destination": destination_label(endpoint),  # never a password or token: not in the message
        "receiver_auth": receiver_auth_summary(endpoint),
    }


async def audit_webhook(
    request: PortalRequest,
    action: str,
    endpoint_id: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    """Records a webhook operation webhookd has just done in the account's audit trail. authsvc names
    the actor from the session (the signed-in user), never from what the portal says."""
    env = env_of(request)
    target = {"endpoint_id": endpoint_id, "environment": env}
    try:
        await auth(request).record_audit_event(
            ipb.RecordAuditEventRequest(
                session_token=viewer_of(request).session_token,
                action=action,
                before=struct(before or {}),
                after=struct({**target, **(after or {})}),
                source_address=request.ip or "",
            ),
        )
    except ClientError as exc:
        # The change is made: answering an error now would invite making it twice.
        AUDIT_FAILURES.inc()
        log.error(
            "audit record failed", extra={"action": action, "endpoint_id": endpoint_id, "error": exc.type}
        )

"""Certification probes (pure: builds, never sends): the deliveries a certification run sends to an
endpoint to see how its receiver answers.

For each signature scheme the endpoint uses (both, separately, for an endpoint of scheme ``both``):

- ``valid``: a correctly signed delivery, signed now;
- ``wrong_signature``: signed with a secret that is not the endpoint's;
- ``stale_timestamp``: correctly signed, but at a time ``STALE_AGE`` ago (beyond the five-minute tolerance
  receivers are taught);
- ``duplicate``: the ``valid`` delivery's event (same id, same body) delivered again, signed now.

Every probe is a ``webhook.test`` event (never published, never a business event), so a receiver that
does act on what it receives does nothing it would regret; each has its own delivery id and, except the
duplicate, its own event id. Sending them (in this order) and recording each answer is the sender's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence

from svckit.catalog import webhook_test
from svckit.certification import STALE_AGE, ProbeKind
from svckit.signing import SignatureScheme, delivery_headers, new_secret
from svckit.vocabulary import Environment
from webhookd._events import TEST_EVENT_KIND, build_envelope

SCHEMES = {
    SignatureScheme.STRIPE: (SignatureScheme.STRIPE,),
    SignatureScheme.STANDARD: (SignatureScheme.STANDARD,),
    SignatureScheme.BOTH: (SignatureScheme.STRIPE, SignatureScheme.STANDARD),
}


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeDelivery:
    delivery_id: str
    event_id: str
    kind: ProbeKind
    scheme: SignatureScheme
    headers: dict[str, str]
    body: bytes
    # What the headers were made from: the secrets signed with and when (a sender signs again from them).
    secrets: tuple[str, ...] = ()
    signed_at: dt.datetime | None = None


def probe_deliveries(
    *,
    endpoint_id: str,
    account_id: str,
    scheme: SignatureScheme,
    secrets: Sequence[str],
    now: dt.datetime,
    new_id: Callable[[str], str],
) -> list[ProbeDelivery]:
    """The probes for one endpoint, in sending order. ``secrets``: the endpoint's, newest first;
    ``new_id(prefix)`` makes the event (``evt``) and delivery (``msg``) ids."""

    def event(signed_at: dt.datetime) -> tuple[str, bytes]:
        event_id = new_id("evt")
        body = build_envelope(
            event_id=event_id,
            kind=TEST_EVENT_KIND,
            created=signed_at,
            environment=Environment.SANDBOX,
            account_id=account_id,
            state="test",
            data=webhook_test(endpoint_id),
        )
        return event_id, body

    def probe(
        used: SignatureScheme,
        kind: ProbeKind,
        event_id: str,
        body: bytes,
        keys: Sequence[str],
        at: dt.datetime,
    ) -> ProbeDelivery:
        headers = delivery_headers(keys, body, event_id, at, used)
        return ProbeDelivery(new_id("msg"), event_id, kind, used, headers, body, tuple(keys), at)

    out: list[ProbeDelivery] = []
    stale_at = now - STALE_AGE
    for used in SCHEMES[scheme]:
        valid_id, valid_body = event(now)
        out += [
            probe(used, ProbeKind.VALID, valid_id, valid_body, secrets, now),
            probe(used, ProbeKind.WRONG_SIGNATURE, *event(now), [new_secret()], now),
            probe(used, ProbeKind.STALE_TIMESTAMP, *event(stale_at), secrets, stale_at),
            probe(used, ProbeKind.DUPLICATE, valid_id, valid_body, secrets, now),
        ]
    return out

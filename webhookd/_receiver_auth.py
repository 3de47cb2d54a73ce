"""How an endpoint's receiver authenticates us (docs/webhooks.md "Receivers that authenticate us"): a TLS
client certificate, OAuth2 client credentials and static custom headers, each optional.

What is stored where (``stored``/``of_stored``): the public parts (the certificate, the token URL, the
client id, scope, audience, the headers) as JSON in ``wh_endpoints.receiver_auth``; the secrets (the
certificate's private key, the client secret) as JSON in ``wh_endpoints.receiver_secrets``, sealed like the
signing secrets (``webhookd._secretbox``, the endpoint id as associated data; ``reseal`` covers it). Neither
secret is ever returned, logged or written to the attempt log.

Custom header values are not secrets: they are returned by the API, shown in the portal and kept in the
attempt log's request headers like ours. So the names that carry credentials by convention
(Authorization, Proxy-Authorization, Cookie) are refused: a receiver that wants a secret gets OAuth2 or a
client certificate. ``header_refusal`` is the rule, a pure decision with its table of cases in
tests/unit/test_receiver_auth.py.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from svckit.signing import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    STANDARD_ID_HEADER,
    STANDARD_SIGNATURE_HEADER,
    STANDARD_TIMESTAMP_HEADER,
)
from webhookd._errors import InvalidRequest

MAX_HEADERS = 10
MAX_HEADER_NAME = 64
MAX_HEADER_VALUE = 1024
MAX_HEADERS_BYTES = 4096
MAX_CLIENT_ID = 255
MAX_CLIENT_SECRET = 1024
MAX_SCOPE = 1024
MAX_AUDIENCE = 1024

# Ours on every delivery, or the connection's own: a custom header never overrides or doubles them.
OURS = frozenset(
    n.lower()
    for n in (
        SIGNATURE_HEADER,
        EVENT_ID_HEADER,
        STANDARD_ID_HEADER,
        STANDARD_TIMESTAMP_HEADER,
        STANDARD_SIGNATURE_HEADER,
        "content-type",
        "content-length",
        "content-encoding",
        "user-agent",
        "host",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "traceparent",
        "tracestate",
    )
)
# Names whose values are credentials by convention: custom header values are not sealed (module doc).
CREDENTIALS = frozenset(("authorization", "proxy-authorization", "cookie"))
# Prefixes of ours: a future header of ours can never collide with a partner's.
OUR_PREFIXES = ("webhook-", "x-service-", "proxy-")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 field-name
_VALUE = re.compile(r"^[\x20-\x7e\t]*$")  # visible ASCII, space and tab


def header_refusal(name: str, value: str) -> str | None:
    """Why a custom header may not be sent, or None. The reason names the header (a 400's message)."""
    if not name or len(name) > MAX_HEADER_NAME or not _TOKEN.match(name):
        shown = name[:MAX_HEADER_NAME]
        return f"header name {shown!r} is not a token of 1 to {MAX_HEADER_NAME} characters (RFC 9110)"
    low = name.lower()
    if low in OURS or low.startswith(OUR_PREFIXES):
        return f"header {name} is set by us on every delivery and cannot be overridden"
    if low in CREDENTIALS:
        return (
            f"header {name} would carry a credential, and custom header values are not secret (they are "
            "shown and logged): use oauth2 or a client certificate"
        )
    if len(value) > MAX_HEADER_VALUE:
        return f"header {name}: its value is longer than {MAX_HEADER_VALUE} characters"
    if not _VALUE.match(value) or value != value.strip():
        return f"header {name}: its value must be visible ASCII without leading or trailing blanks"
    return None


def checked_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The custom headers, each checked (``header_refusal``), bounded in count and size; InvalidRequest
    naming the first refused header. Names keep their case; two spellings of one name are refused."""
    if len(headers) > MAX_HEADERS:
        raise InvalidRequest(f"receiver_auth.headers: at most {MAX_HEADERS} headers")
    seen: set[str] = set()
    size = 0
    for name, value in headers.items():
        reason = header_refusal(name, value)
        if reason:
            raise InvalidRequest(f"receiver_auth.headers: {reason}")
        if name.lower() in seen:
            raise InvalidRequest(f"receiver_auth.headers: header {name} is given twice")
        seen.add(name.lower())
        size += len(name) + len(value)
    if size > MAX_HEADERS_BYTES:
        raise InvalidRequest(f"receiver_auth.headers: names and values longer than {MAX_HEADERS_BYTES} bytes")
    return tuple(sorted(headers.items(), key=lambda kv: kv[0].lower()))


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    """A client certificate: issued by the platform's CA for the account, or uploaded by the partner."""

    cert_pem: str
    key_pem: str = field(repr=False)
    issued_by_platform: bool
    fingerprint: str  # SHA-256 of the DER certificate, hex
    not_after: dt.datetime
    subject: str


@dataclass(frozen=True, slots=True)
class OAuth2Credentials:
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""
    audience: str = ""


@dataclass(frozen=True, slots=True)
class ReceiverAuth:
    """All three, each optional; ``endpoint_id`` keys the TLS context and token caches."""

    endpoint_id: str
    mtls: ClientCertificate | None = None
    oauth2: OAuth2Credentials | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        return self.mtls is None and self.oauth2 is None and not self.headers


def stored(auth: ReceiverAuth | None) -> tuple[str, str]:
    """(public JSON, secrets JSON) as the two columns hold them before sealing; ("", "") for none."""
    if auth is None or auth.empty:
        return "", ""
    public: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    if auth.mtls is not None:
        c = auth.mtls
        public["mtls"] = {
            "cert": c.cert_pem,
            "platform": c.issued_by_platform,
            "sha256": c.fingerprint,
            "notAfter": c.not_after.isoformat(),
            "subject": c.subject,
        }
        secrets["key"] = c.key_pem
    if auth.oauth2 is not None:
        o = auth.oauth2
        public["oauth2"] = {
            "tokenUrl": o.token_url,
            "clientId": o.client_id,
            "scope": o.scope,
            "audience": o.audience,
        }
        secrets["clientSecret"] = o.client_secret
    if auth.headers:
        public["headers"] = [list(h) for h in auth.headers]
    return json.dumps(public), json.dumps(secrets)


def of_stored(endpoint_id: str, public: str, secrets: str) -> ReceiverAuth | None:
    """The record from the two columns (the secrets already opened); None when there is none."""
    if not public:
        return None
    p = json.loads(public)
    s = json.loads(secrets) if secrets else {}
    mtls = oauth2 = None
    if "mtls" in p:
        m = p["mtls"]
        mtls = ClientCertificate(
            m["cert"],
            s["key"],
            m["platform"],
            m["sha256"],
            dt.datetime.fromisoformat(m["notAfter"]),
            m["subject"],
        )
    if "oauth2" in p:
        o = p["oauth2"]
        oauth2 = OAuth2Credentials(o["tokenUrl"], o["clientId"], s["clientSecret"], o["scope"], o["audience"])
    headers = tuple((h[0], h[1]) for h in p.get("headers", []))
    return ReceiverAuth(endpoint_id, mtls, oauth2, headers)

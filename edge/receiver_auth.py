"""A webhook endpoint's ``receiverAuth`` (docs/webhooks.md "Receivers that authenticate us"): the JSON
the partner sends, as webhookd's ``ReceiverAuth``, and what the edge shows back (never a private key or a
client secret). The shapes are checked here (every field's type and size, no unknown field, as
``edge.openapi_receiver_auth`` documents them); what they say (a certificate that parses, a token URL
webhookd may call, a header that is not ours) is webhookd's to check."""

from __future__ import annotations

import re
from typing import Any

from edge.exceptions import EdgeError
from travel.webhooks.v1 import webhooks_pb2

FIELD = "receiverAuth"
MAX_CERTIFICATE = 32 * 1024
MAX_PRIVATE_KEY = 16 * 1024
MAX_HEADERS = 10
MAX_HEADER_NAME = 64
MAX_HEADER_VALUE = 1024
LIMITS = {
    "tokenUrl": 2048,
    "clientId": 255,
    "clientSecret": 1024,
    "scope": 1024,
    "audience": 1024,
    "certificate": MAX_CERTIFICATE,
    "privateKey": MAX_PRIVATE_KEY,
    "sha256": 64,
}
CERT_FIELDS = {"issuedByPlatform", "certificate", "privateKey", "sha256"}
OAUTH_FIELDS = {"tokenUrl", "clientId", "clientSecret", "scope", "audience"}
TOP_FIELDS = {"clientCertificate", "oauth2", "headers"}
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _bad(path: str, what: str) -> EdgeError:
    return EdgeError(f"the field {path} {what}", type="invalid_request")


def _object(value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(path, "must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _bad(path, f"has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return value


def _text(body: dict[str, Any], name: str, path: str, *, required: bool = False) -> str:
    value = body.get(name)
    if value is None:
        if required:
            raise _bad(f"{path}.{name}", "is required")
        return ""
    if not isinstance(value, str) or len(value) > LIMITS[name]:
        raise _bad(f"{path}.{name}", f"must be a string of at most {LIMITS[name]} characters")
    return value


def receiver_auth_field(body: dict[str, Any]) -> webhooks_pb2.ReceiverAuth | None:
    """``receiverAuth`` as webhookd's message; None when absent or null (none: on an update, removed)."""
    value = body.get(FIELD)
    if value is None:
        return None
    top = _object(value, FIELD, TOP_FIELDS)
    out = webhooks_pb2.ReceiverAuth()
    if top.get("clientCertificate") is not None:
        path = f"{FIELD}.clientCertificate"
        cert = _object(top["clientCertificate"], path, CERT_FIELDS)
        platform = cert.get("issuedByPlatform", False)
        if not isinstance(platform, bool):
            raise _bad(f"{path}.issuedByPlatform", "must be true or false")
        sha256 = _text(cert, "sha256", path)
        if sha256 and not SHA256.match(sha256):
            raise _bad(f"{path}.sha256", "must be 64 lower-case hex digits")
        out.client_certificate.CopyFrom(
            webhooks_pb2.ClientCertificate(
                issued_by_platform=platform,
                certificate_pem=_text(cert, "certificate", path),
                private_key_pem=_text(cert, "privateKey", path),
                sha256_fingerprint=sha256,
            )
        )
    if top.get("oauth2") is not None:
        path = f"{FIELD}.oauth2"
        oauth = _object(top["oauth2"], path, OAUTH_FIELDS)
        out.oauth2.CopyFrom(
            webhooks_pb2.OAuth2ClientCredentials(
                token_url=_text(oauth, "tokenUrl", path, required=True),
                client_id=_text(oauth, "clientId", path, required=True),
                client_secret=_text(oauth, "clientSecret", path),
                scope=_text(oauth, "scope", path),
                audience=_text(oauth, "audience", path),
            )
        )
    headers = top.get("headers")
    if headers is not None:
        path = f"{FIELD}.headers"
        if not isinstance(headers, dict) or len(headers) > MAX_HEADERS:
            raise _bad(path, f"must be an object of at most {MAX_HEADERS} headers")
        for name, text in headers.items():
            if len(name) > MAX_HEADER_NAME or not isinstance(text, str) or len(text) > MAX_HEADER_VALUE:
                raise _bad(
                    path,
                    f"must map names of at most {MAX_HEADER_NAME} characters to strings of at most "
                    f"{MAX_HEADER_VALUE}",
                )
            out.headers[name] = text
    return out


def receiver_auth(ep: webhooks_pb2.Endpoint) -> dict[str, Any] | None:
    """What an endpoint shows of it: public parts only."""
    if not ep.HasField("receiver_auth"):
        return None
    auth = ep.receiver_auth
    out: dict[str, Any] = {"clientCertificate": None, "oauth2": None, "headers": dict(auth.headers)}
    if auth.HasField("client_certificate"):
        c = auth.client_certificate
        out["clientCertificate"] = {
            "issuedByPlatform": c.issued_by_platform,
            "certificate": c.certificate_pem,
            "sha256": c.sha256_fingerprint,
            "subject": c.subject,
            "notAfter": c.not_after.ToDatetime().isoformat() + "Z",
        }
    if auth.HasField("oauth2"):
        o = auth.oauth2
        out["oauth2"] = {
            "tokenUrl": o.token_url,
            "clientId": o.client_id,
            "scope": o.scope,
            "audience": o.audience,
        }
    return out

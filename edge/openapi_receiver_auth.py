"""The OpenAPI schemas of a webhook endpoint's ``receiverAuth`` (edge.receiver_auth checks the same
shapes, from the same limits): what a partner sends, and what comes back (no secret)."""

from __future__ import annotations

from typing import Any

from edge.receiver_auth import LIMITS, MAX_HEADER_NAME, MAX_HEADER_VALUE, MAX_HEADERS, SHA256

_TIME = {"type": "string", "format": "date-time"}


def _text(name: str, description: str) -> dict[str, Any]:
    return {"type": "string", "maxLength": LIMITS[name], "description": description}


RECEIVER_AUTH_BODY: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "description": "how the receiver authenticates us (docs/webhooks.md, Receivers that authenticate us); "
    "each part optional; on an update it replaces the whole, null removes it",
    "properties": {
        "clientCertificate": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "description": "a TLS client certificate: issuedByPlatform true (one issued for the account by "
            "the platform's CA), or an upload (certificate and privateKey); on an update, the current "
            "sha256 alone keeps it",
            "properties": {
                "issuedByPlatform": {"type": "boolean"},
                "certificate": _text("certificate", "PEM, the leaf first, then its intermediates"),
                "privateKey": _text("privateKey", "PEM, not encrypted; write only, never returned"),
                "sha256": {"type": "string", "pattern": SHA256.pattern},
            },
        },
        "oauth2": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["tokenUrl", "clientId"],
            "description": "OAuth2 client credentials: a bearer token from the receiver's token endpoint",
            "properties": {
                "tokenUrl": {
                    **_text("tokenUrl", "https://, checked like the endpoint's url"),
                    "format": "uri",
                    "pattern": "^https://[^\\s#@/?]+(/[^\\s#]*)?$",
                },
                "clientId": {**_text("clientId", "the client id"), "minLength": 1},
                "clientSecret": _text(
                    "clientSecret",
                    "write only, never returned; required unless an update keeps the current one",
                ),
                "scope": _text("scope", "optional"),
                "audience": _text("audience", "optional"),
            },
        },
        "headers": {
            "type": ["object", "null"],
            "maxProperties": MAX_HEADERS,
            "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", "maxLength": MAX_HEADER_NAME},
            "additionalProperties": {"type": "string", "maxLength": MAX_HEADER_VALUE},
            "description": "static headers on every delivery; never one of ours (signature, webhook-*, "
            "X-Service-*, Content-Type, User-Agent, ...) nor Authorization, Proxy-Authorization or Cookie "
            "(400 naming it); the values are not secret",
        },
    },
}

RECEIVER_AUTH_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {
        "clientCertificate": {
            "type": ["object", "null"],
            "properties": {
                "issuedByPlatform": {"type": "boolean"},
                "certificate": {"type": "string"},
                "sha256": {"type": "string"},
                "subject": {"type": "string"},
                "notAfter": _TIME,
            },
        },
        "oauth2": {
            "type": ["object", "null"],
            "properties": {
                "tokenUrl": {"type": "string"},
                "clientId": {"type": "string"},
                "scope": {"type": "string"},
                "audience": {"type": "string"},
            },
        },
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

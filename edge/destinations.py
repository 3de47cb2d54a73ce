"""An endpoint's destination in the HTTP API (docs/webhooks.md "Destinations"): ``type`` (http, polling,
amqp, nats), ``url`` (http only) and the ``amqp`` or ``nats`` settings object, both directions, and their
OpenAPI schemas.

The rules, the same here and in the schemas (so what the document refuses is refused): an http endpoint
(``type`` absent or "http") has a ``url`` and no settings object; a polling one neither; an amqp one its
``amqp`` object and no url, a nats one its ``nats``. On an update, ``amqp``/``nats`` come with their
``type``, and a ``url`` alone makes (or keeps) the endpoint an http one. Each string matches its pattern
(``PATTERNS``); what the values mean (a broker host's address, a URL's port) webhookd checks, its errors
naming the field (``amqp.url: ...``). Passwords and tokens are write-only: a response says only
``passwordSet`` / ``credentialsSet``.
"""

from __future__ import annotations

import re
from typing import Any

from edge.exceptions import EdgeError
from svckit.prototables import DESTINATION_TYPE
from svckit.webhook_status import DestinationType
from travel.webhooks.v1 import webhooks_pb2

FIELDS = {"type", "amqp", "nats"}
SETTINGS = {DestinationType.AMQP: "amqp", DestinationType.NATS: "nats"}
MAX_SERVERS = 8
# A NATS subject token: printable ASCII but space, ".", "*" and ">" (no wildcards); the first not "$".
_TOKEN = "[!-)+-\\-/-=?-~]"
_FIRST = "[!#%-)+-\\-/-=?-~]"
_SECRET = "^[^\\x00-\\x1f\\x7f]*$"
PATTERNS = {
    "amqp.url": "^amqps?://([A-Za-z0-9._~%-]+@)?[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%-]*)?$",
    "amqp.exchange": "^[A-Za-z0-9_.:-]*$",
    "amqp.routingKey": "^[!-~]*$",
    "amqp.password": _SECRET,
    "nats.servers": "^(nats|tls)://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$",
    "nats.subject": f"^{_FIRST}{_TOKEN}*(\\.{_TOKEN}+)*$",
    "nats.user": "^[!-~]*$",
    "nats.password": _SECRET,
    "nats.token": _SECRET,
}
MAX_LEN = {"url": 2048, "servers": 2048, "password": 1024, "token": 1024}
AMQP_FIELDS = ("url", "exchange", "routingKey", "password")
NATS_FIELDS = ("subject", "user", "password", "token")
_COMPILED = {k: re.compile(v) for k, v in PATTERNS.items()}
# JSON names -> the update mask's paths.
MASK = {"signatureScheme": "signature_scheme", "filter": "filter_json", "receiverAuth": "receiver_auth"}


def _bad(message: str) -> EdgeError:
    return EdgeError(message, type="invalid_request")


def type_of(body: dict[str, Any]) -> DestinationType | None:
    """``type`` as a word; None when absent."""
    if "type" not in body:
        return None
    value = body["type"]
    if value not in tuple(DestinationType):
        raise _bad(f"the field type must be one of {', '.join(t.value for t in DestinationType)}")
    return DestinationType(value)


def _object(body: dict[str, Any], name: str, allowed: set[str]) -> dict[str, Any] | None:
    if name not in body:
        return None
    value = body[name]
    if not isinstance(value, dict):
        raise _bad(f"the field {name} must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _bad(f"unknown field(s) in {name}: {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return value


def _string(obj: dict[str, Any], parent: str, name: str, *, required: bool = False) -> str:
    where = f"{parent}.{name}"
    if name not in obj:  # absent is empty (null is no value: a 400, as the OpenAPI schema says)
        if required:
            raise _bad(f"the field {where} is required")
        return ""
    value = obj[name]
    max_len = MAX_LEN.get(name, 255)
    if not isinstance(value, str) or len(value) > max_len:
        raise _bad(f"the field {where} must be a string of at most {max_len} characters")
    if not _COMPILED[where].fullmatch(value):
        raise _bad(f"the field {where} must match {PATTERNS[where]}")
    return value


def amqp_pb(body: dict[str, Any]) -> webhooks_pb2.AmqpDestination | None:
    obj = _object(body, "amqp", set(AMQP_FIELDS))
    if obj is None:
        return None
    s = {name: _string(obj, "amqp", name, required=name == "url") for name in AMQP_FIELDS}
    return webhooks_pb2.AmqpDestination(
        url=s["url"], exchange=s["exchange"], routing_key=s["routingKey"], password=s["password"]
    )


def nats_pb(body: dict[str, Any]) -> webhooks_pb2.NatsDestination | None:
    obj = _object(body, "nats", {"servers", *NATS_FIELDS})
    if obj is None:
        return None
    servers = obj.get("servers")
    if (
        not isinstance(servers, list)
        or not 1 <= len(servers) <= MAX_SERVERS
        or not all(
            isinstance(s, str) and len(s) <= 2048 and _COMPILED["nats.servers"].fullmatch(s) for s in servers
        )
    ):
        raise _bad(
            f"the field nats.servers must be a list of 1 to {MAX_SERVERS} server URLs (nats://host:4222)"
        )
    s = {name: _string(obj, "nats", name, required=name == "subject") for name in NATS_FIELDS}
    return webhooks_pb2.NatsDestination(
        servers=servers, subject=s["subject"], user=s["user"], password=s["password"], token=s["token"]
    )


# The fields whose null means "none" (on an update: remove it), as the OpenAPI schema says.
NULLABLE = frozenset({"filter", "receiverAuth"})


def refuse_nulls(body: dict[str, Any]) -> None:
    """An endpoint body's fields are absent or have a value: null is a 400 naming the field, as the
    OpenAPI schema says, but for the NULLABLE ones."""
    for name, value in body.items():
        if value is None and name not in NULLABLE:
            raise _bad(f"the field {name} must not be null; leave it out instead")


def _check_combination(body: dict[str, Any], update: bool) -> None:
    """Which fields go with which type (the module's rules)."""
    kind = type_of(body)
    if kind is None and not update:
        kind = DestinationType.HTTP
    for k, name in SETTINGS.items():
        if name in body and kind is not k:
            raise _bad(f"the field {name} needs the field type to be {name}")
        if kind is k and name not in body:
            raise _bad(f"the field {name} is required for type {name}")
    if kind is not None and kind is not DestinationType.HTTP and "url" in body:
        raise _bad(f"the field url is only for type http (this is type {kind})")
    if kind is DestinationType.HTTP and "url" not in body:
        raise _bad("the field url is required for type http")


def request_fields(body: dict[str, Any], *, update: bool = False) -> dict[str, Any]:
    """The Register/UpdateEndpointRequest fields of the destination present in ``body``; on an update a
    url alone is type http (the update mask then names "type" too)."""
    refuse_nulls(body)
    _check_combination(body, update)
    out: dict[str, Any] = {}
    kind = type_of(body)
    if update and kind is None and "url" in body:
        kind = DestinationType.HTTP
    if kind is not None:
        out["type"] = DESTINATION_TYPE.pb(kind)
    amqp = amqp_pb(body)
    if amqp is not None:
        out["amqp"] = amqp
    nats = nats_pb(body)
    if nats is not None:
        out["nats"] = nats
    return out


def mask_paths(body: dict[str, Any]) -> list[str]:
    """The update mask of an update's body: its fields by their proto names; a url is type http too."""
    paths = {MASK.get(k, k) for k in body}
    if "url" in body:
        paths.add("type")
    return sorted(paths)


def shown(ep: webhooks_pb2.Endpoint) -> dict[str, Any]:
    """The response's destination fields: type, url (null but for http) and the type's settings."""
    kind = DESTINATION_TYPE.get(ep.type, DestinationType.HTTP.value)
    out: dict[str, Any] = {"type": kind, "amqp": None, "nats": None}
    if kind != DestinationType.HTTP:
        out["url"] = None
    if ep.HasField("amqp"):
        a = ep.amqp
        out["amqp"] = {
            "url": a.url,
            "exchange": a.exchange,
            "routingKey": a.routing_key,
            "passwordSet": a.password_set,
        }
    if ep.HasField("nats"):
        n = ep.nats
        out["nats"] = {
            "servers": list(n.servers),
            "subject": n.subject,
            "user": n.user,
            "credentialsSet": n.credentials_set,
        }
    return out


# -- OpenAPI ------------------------------------------------------------------------------------------
def _str(where: str, description: str = "") -> dict[str, Any]:
    name = where.split(".")[1]
    out: dict[str, Any] = {"type": "string", "maxLength": MAX_LEN.get(name, 255), "pattern": PATTERNS[where]}
    return out | ({"description": description} if description else {})


AMQP_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url"],
    "properties": {
        "url": _str("amqp.url", "amqp://user@host:5672/vhost or amqps://; no password (give it in password)"),
        "exchange": _str("amqp.exchange", 'the exchange ("" the default exchange)'),
        "routingKey": _str("amqp.routingKey"),
        "password": _str("amqp.password", "write-only; on an update, absent or empty keeps the stored one"),
    },
}
NATS_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["servers", "subject"],
    "properties": {
        "servers": {"type": "array", "minItems": 1, "maxItems": MAX_SERVERS, "items": _str("nats.servers")},
        "subject": _str("nats.subject", "a subject a JetStream stream of yours captures; no wildcards"),
        "user": _str("nats.user"),
        "password": _str("nats.password", "write-only; on an update, absent or empty keeps the stored one"),
        "token": _str("nats.token", "write-only; instead of user and password"),
    },
}
TYPE_SCHEMA = {
    "enum": [t.value for t in DestinationType],
    "description": "where deliveries go: http (the default), polling, amqp (RabbitMQ), nats (JetStream)",
}


def _refuses(*names: str) -> dict[str, Any]:
    return {"not": {"anyOf": [{"required": [n]} for n in names]}}


def _when_type(kind: DestinationType, then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"required": ["type"], "properties": {"type": {"const": kind.value}}}, "then": then}


# What a polling or broker endpoint may carry as receiverAuth: nothing (absent, null, or an object with
# nothing set); webhookd refuses more ("only http endpoints have one").
_NO_RECEIVER_AUTH = {
    "properties": {
        "receiverAuth": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "clientCertificate": {"type": "null"},
                        "oauth2": {"type": "null"},
                        "headers": {"type": ["object", "null"], "maxProperties": 0},
                    },
                },
            ]
        }
    }
}


def body_rules(update: bool) -> list[dict[str, Any]]:
    """``allOf`` of the combinations a body may have (the module's rules, as the edge checks them), as
    if/then pairs: a schema of alternatives (``anyOf``) would make client generators lose the body's
    model."""
    t = DestinationType
    no_type = {"not": {"required": ["type"]}}
    default = _refuses("amqp", "nats") | ({} if update else {"required": ["url"]})
    return [
        {"if": no_type, "then": default},
        _when_type(t.HTTP, {"required": ["url"]} | _refuses("amqp", "nats")),
        _when_type(t.POLLING, _refuses("url", "amqp", "nats") | _NO_RECEIVER_AUTH),
        _when_type(t.AMQP, {"required": ["amqp"]} | _refuses("url", "nats") | _NO_RECEIVER_AUTH),
        _when_type(t.NATS, {"required": ["nats"]} | _refuses("url", "amqp") | _NO_RECEIVER_AUTH),
    ]


def endpoint_schema_properties() -> dict[str, Any]:
    nullable_object: dict[str, Any] = {"type": ["object", "null"]}
    return {
        "type": {"enum": [t.value for t in DestinationType]},
        "amqp": nullable_object
        | {
            "properties": {
                "url": {"type": "string"},
                "exchange": {"type": "string"},
                "routingKey": {"type": "string"},
                "passwordSet": {"type": "boolean"},
            }
        },
        "nats": nullable_object
        | {
            "properties": {
                "servers": {"type": "array", "items": {"type": "string"}},
                "subject": {"type": "string"},
                "user": {"type": "string"},
                "credentialsSet": {"type": "boolean"},
            }
        },
    }

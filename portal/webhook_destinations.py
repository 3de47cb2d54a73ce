"""The endpoint form's destination (docs/webhooks.md "Destinations"): its type and the amqp or nats
settings, form fields <-> webhookd's request fields, pure. Passwords and tokens are write-only: the form
never shows them, and a field left empty on an edit keeps the stored one."""

from __future__ import annotations

from typing import Any

from svckit.clients import ClientError
from svckit.prototables import DESTINATION_TYPE
from svckit.webhook_status import DestinationType
from travel.webhooks.v1 import webhooks_pb2 as wpb

DESTINATION_CHOICES: tuple[tuple[str, str], ...] = (
    (DestinationType.HTTP.value, "a signed POST to the HTTPS URL above (the default)"),
    (DestinationType.AMQP.value, "a RabbitMQ exchange of yours (publisher confirms)"),
    (DestinationType.NATS.value, "a NATS JetStream subject of yours (publish acknowledgement)"),
    (DestinationType.POLLING.value, "nothing is sent: you poll for the events"),
)
# The form's fields of each type's settings, by the request's field names.
AMQP_FIELDS = ("url", "exchange", "routing_key", "password")
NATS_FIELDS = ("servers", "subject", "user", "password", "token")


def destination_word(number: int) -> str:
    return DESTINATION_TYPE.get(number, DestinationType.HTTP.value) or DestinationType.HTTP.value


def destination_type(form: Any) -> DestinationType:
    word = form.get("type") or DestinationType.HTTP.value
    if word not in tuple(DestinationType):
        choices = ", ".join(t.value for t in DestinationType)
        raise ClientError("invalid_request", f"choose one of {choices}", field="type")
    return DestinationType(word)


def destination_request(form: Any) -> dict[str, Any]:
    """RegisterEndpointRequest / UpdateEndpointRequest fields of the form's destination."""
    kind = destination_type(form)
    out: dict[str, Any] = {"type": DESTINATION_TYPE.pb(kind)}
    if kind is DestinationType.HTTP:
        out["url"] = form.get("url", "")
    elif kind is DestinationType.AMQP:
        out["amqp"] = wpb.AmqpDestination(**{f: form.get(f"amqp_{f}", "") for f in AMQP_FIELDS})
    elif kind is DestinationType.NATS:
        values = {f: form.get(f"nats_{f}", "") for f in NATS_FIELDS}
        out["nats"] = wpb.NatsDestination(servers=values.pop("servers").replace(",", " ").split(), **values)
    return out


def destination_paths(form: Any) -> list[str]:
    """The update mask's paths of the form's destination (a form without the field: the url alone)."""
    if not form.get("type"):
        return ["url"]
    own = {DestinationType.HTTP: "url", DestinationType.AMQP: "amqp", DestinationType.NATS: "nats"}
    kind = destination_type(form)
    return ["type", own[kind]] if kind in own else ["type"]


def destination_values(endpoint: wpb.Endpoint) -> dict[str, object]:
    """An endpoint's destination as its edit form's values (no password or token: write-only)."""
    out: dict[str, object] = {"type": destination_word(endpoint.type)}
    if endpoint.HasField("amqp"):
        a = endpoint.amqp
        out |= {
            "amqp_url": a.url,
            "amqp_exchange": a.exchange,
            "amqp_routing_key": a.routing_key,
            "amqp_password_set": a.password_set,
        }
    if endpoint.HasField("nats"):
        n = endpoint.nats
        out |= {
            "nats_servers": " ".join(n.servers),
            "nats_subject": n.subject,
            "nats_user": n.user,
            "nats_credentials_set": n.credentials_set,
        }
    return out


def form_values(form: Any) -> dict[str, object]:
    """A refused form's destination values, to show it again (never a password or token)."""
    keep = [f"amqp_{f}" for f in AMQP_FIELDS if f != "password"] + [
        f"nats_{f}" for f in NATS_FIELDS if f not in ("password", "token")
    ]
    return {"type": form.get("type") or DestinationType.HTTP.value} | {k: form.get(k, "") for k in keep}


def destination_label(endpoint: wpb.Endpoint) -> str:
    """Where an endpoint's deliveries go, in a line (its url for http): the ``destination`` filter."""
    kind = destination_word(endpoint.type)
    if kind == DestinationType.AMQP.value and endpoint.HasField("amqp"):
        a = endpoint.amqp
        return f"amqp: exchange {a.exchange or '(default)'}, routing key {a.routing_key} at {a.url}"
    if kind == DestinationType.NATS.value and endpoint.HasField("nats"):
        return f"nats: subject {endpoint.nats.subject} at {' '.join(endpoint.nats.servers)}"
    if kind == DestinationType.HTTP.value:
        return endpoint.url
    return kind

"""Thin payloads (docs/webhooks.md "Thin payloads"): what an endpoint with ``payload: thin`` is sent
instead of the whole event, and its JSON Schema per kind. Pure, standard library only.

A thin envelope keeps the event's ``id``, ``type``, ``created``, ``livemode`` and ``account``, and of its
``data`` only the kind's resource references (``EventKind.references``: the booking, order, payment...
ids and the product), never the traveller's data, amounts or free text. The receiver reads the whole
event with ``GET /v1/events/{id}``, with a key of the kind's reader scope: the read is authorised and
in the request log, which a payload pushed to a URL never is (the Standard Webhooks recommendation for
payloads holding personal data).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from svckit.eventkinds import envelope_schema, kind_of

THIN_FIELDS: Final = ("id", "type", "created", "livemode", "account")


def references(kind: str) -> tuple[str, ...]:
    """The ``data`` fields a thin delivery of ``kind`` keeps; () for a kind the catalog lacks."""
    try:
        return kind_of(kind).references
    except KeyError:
        return ()


def thin_envelope(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The thin form of a full envelope (parsed): its head fields and its references, in that order."""
    out = {k: envelope[k] for k in THIN_FIELDS if k in envelope}
    data = envelope.get("data")
    data = data if isinstance(data, Mapping) else {}
    out["data"] = {k: data[k] for k in references(str(envelope.get("type", ""))) if k in data}
    return out


def thin_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of a thin envelope of ``kind``: the full envelope's, without ``state``, its ``data``
    narrowed to the references (those the full data requires stay required)."""
    schema = envelope_schema(kind)
    schema["title"] = f"{kind} event (thin)"
    props = schema["properties"]
    props.pop("state", None)
    schema["required"] = [r for r in schema["required"] if r != "state"]
    full = props["data"]
    refs = references(kind)
    props["data"] = {
        "type": "object",
        "properties": {k: copy.deepcopy(full["properties"][k]) for k in refs if k in full["properties"]},
        "required": [r for r in full.get("required", []) if r in refs],
        "additionalProperties": False,
    }
    return schema

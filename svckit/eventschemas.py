"""The building blocks of the event catalog's JSON Schemas (``svckit.eventkinds``): typed fields with their
descriptions, the subject of a booking, payment or eSIM event, and the object schema every kind's ``data``
is. Standard library only."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from svckit.resources import BOOKING_PRODUCTS, ORDER_PRODUCTS

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# -- schema building blocks --------------------------------------------------------------------------------
def string_field(description: str, **kw: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **kw}


def id_field(prefix: str, description: str) -> dict[str, Any]:
    return string_field(description, pattern=f"^{prefix}_[A-Za-z0-9_]+$")


def int_field(description: str, **kw: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **kw}


def date_field(description: str) -> dict[str, Any]:
    return string_field(description, format="date", pattern=r"^\d{4}-\d{2}-\d{2}$")


def timestamp_field(description: str) -> dict[str, Any]:
    return string_field(
        description, format="date-time", pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
    )


AMOUNT = int_field("amount in minor units of `currency` (25800 EUR is 258.00 EUR)", minimum=0)
CURRENCY = string_field("ISO 4217 currency code", pattern="^[A-Z]{3}$")
CUSTOMER_REF = string_field("the partner's X-Partner-Customer-Ref, when one was sent", minLength=1)
BOOKING_FIELDS: dict[str, Any] = {
    "booking": id_field("bk", "the booking"),
    "order": id_field("ord", "the eSIM order"),
    "product": {"enum": [*BOOKING_PRODUCTS, *ORDER_PRODUCTS], "description": "the product"},
    "offer": id_field("off", "the booked offer (a booking)"),
    "plan": id_field("plan", "the eSIM plan (an order)"),
    "amount": AMOUNT,
    "currency": CURRENCY,
    "customerRef": CUSTOMER_REF,
}
# The subject of a booking or payment event: a booking (hotels, flights) or an eSIM order.
BOOKING_SUBJECT = {
    "required": ["booking", "offer"],
    "properties": {"product": {"enum": list(BOOKING_PRODUCTS)}},
    "not": {"anyOf": [{"required": ["order"]}, {"required": ["plan"]}]},
}
ORDER_SUBJECT = {
    "required": ["order", "plan"],
    "properties": {"product": {"const": ORDER_PRODUCTS[0]}},
    "not": {"anyOf": [{"required": ["booking"]}, {"required": ["offer"]}]},
}
SUBJECT_REQUIRED = ["product", "amount", "currency"]


def object_schema(
    kind: str,
    properties: Mapping[str, Any],
    required: list[str],
    one_of: list[dict[str, Any]] | None = None,
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "title": f"{kind} data",
        "type": "object",
        "properties": {k: v for k, v in properties.items() if k not in drop},
        "required": required,
        "additionalProperties": False,
    }
    if one_of:
        schema["oneOf"] = one_of
    return schema


def booking_schema(
    kind: str,
    extra: Mapping[str, Any],
    required: list[str],
    subjects: str = "both",
    one_of: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A booking, payment or eSIM event: the subject's fields and ``extra``. ``subjects`` is "booking"
    (hotels, flights), "order" (eSIM) or "both" (exactly one of them)."""
    props = {**BOOKING_FIELDS, **extra}
    if subjects == "both":
        return object_schema(kind, props, [*SUBJECT_REQUIRED, *required], [BOOKING_SUBJECT, ORDER_SUBJECT])
    if subjects == "booking":
        drop, first = ("order", "plan"), ["booking", "offer"]
        props["product"] = {"enum": list(BOOKING_PRODUCTS), "description": "the product"}
    else:
        drop, first = ("booking", "offer"), ["order", "plan"]
        props["product"] = {"const": ORDER_PRODUCTS[0], "description": "the product"}
    return object_schema(kind, props, [*first, *SUBJECT_REQUIRED, *required], one_of, drop)


PAYMENT = id_field("pay", "the traveller's payment")
HOLD = id_field("hold", "the hold on the partner's credit (mode A)")
REASON = "machine-readable cause"


# -- a sample from a schema --------------------------------------------------------------------------------
SAMPLE_DATE, SAMPLE_TIMESTAMP = "2026-03-14", "2026-03-14T09:30:00.000Z"
_ID = re.compile(r"^\^([a-z]+)_\[A-Za-z0-9_\]\+\$$")
_LETTERS = re.compile(r"^\^\[A-Z\]\{(\d+)\}\$$")
_DIGITS = re.compile(r"^\^\[0-9\]\{(\d+)(?:,\d+)?\}\$$")
_LITERAL = re.compile(r"^\^([A-Za-z0-9:_-]+)$")


def sample_value(name: str, prop: Mapping[str, Any]) -> Any:
    """A value ``prop`` (a field of the building blocks above) admits, for a kind without a sample builder of
    its own. ValueError for a shape this does not know (give the kind a builder in svckit.catalog)."""
    if "const" in prop:
        return prop["const"]
    if "enum" in prop:
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "integer":
        return int(prop.get("minimum", prop.get("maximum", 1)))
    if kind == "number":
        return float(prop.get("minimum", prop.get("maximum", 1)))
    if kind == "boolean":
        return False
    if kind == "object":
        return {"sample": True} if prop.get("minProperties") else {}
    if kind != "string":
        raise ValueError(f"{name}: no sample for a field of type {kind!r}")
    if prop.get("format") == "date":
        return SAMPLE_DATE
    if prop.get("format") == "date-time":
        return SAMPLE_TIMESTAMP
    pattern = prop.get("pattern")
    if pattern is None:
        return f"sample {name}"
    if found := _ID.match(pattern):
        return f"{found[1]}_test_sample0000000000"
    if found := _LETTERS.match(pattern):
        return "EUR" if found[1] == "3" else "A" * int(found[1])
    if found := _DIGITS.match(pattern):
        return "0" * int(found[1])
    if found := _LITERAL.match(pattern):
        return f"{found[1]}sample"
    raise ValueError(f"{name}: no sample for the pattern {pattern!r}")


def sample_of(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` the object ``schema`` admits: its required fields (and the first ``oneOf`` branch's), each
    with ``sample_value``; a branch's own ``properties`` (a narrower ``product``) win."""
    branch = (schema.get("oneOf") or [{}])[0]
    props = {**schema["properties"], **branch.get("properties", {})}
    names = [*schema.get("required", []), *branch.get("required", [])]
    return {name: sample_value(name, props[name]) for name in dict.fromkeys(names)}

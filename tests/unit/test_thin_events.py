"""Thin payloads (svckit.thinevents): each kind's references are fields of its data and never a person's
data, an amount or free text; the thin form of every kind's example is valid against its thin schema, and
keeps exactly the head fields and the references."""

from __future__ import annotations

import jsonschema
import pytest

from svckit.catalog import TEST_KIND, catalog, example_envelope, kind_of
from svckit.events import EVENT_KINDS
from svckit.thinevents import THIN_FIELDS, thin_envelope, thin_schema

KINDS = [*EVENT_KINDS, TEST_KIND.kind]
# What a thin delivery must never carry: a traveller's or a key's data, money, free text, secrets.
NEVER = {
    "customerRef",
    "amount",
    "currency",
    "message",
    "reason",
    "iccid",
    "activationCode",
    "hint",
    "name",
    "url",
    "changes",
    "supplierReference",
    "error",
}


@pytest.mark.parametrize("kind", KINDS)
def test_references_are_fields_and_never_personal(kind: str) -> None:
    refs = kind_of(kind).references
    props = kind_of(kind).schema["properties"]
    assert set(refs) <= set(props), set(refs) - set(props)
    assert not set(refs) & NEVER


@pytest.mark.parametrize("kind", KINDS)
def test_the_thin_example_is_valid_and_holds_only_references(kind: str) -> None:
    full = example_envelope(kind)
    thin = thin_envelope(full)
    jsonschema.validate(thin, thin_schema(kind))
    assert list(thin) == [*THIN_FIELDS, "data"]
    assert all(thin[k] == full[k] for k in THIN_FIELDS)
    assert set(thin["data"]) == set(kind_of(kind).references) & set(full["data"])


def test_the_thin_schema_refuses_a_full_event() -> None:
    full = example_envelope("booking.confirmed")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(full, thin_schema("booking.confirmed"))


def test_the_catalog_publishes_both_schemas() -> None:
    entry = next(e for e in catalog() if e["kind"] == "esim.provisioned")
    assert entry["references"] == ["order", "plan", "product"]
    assert set(entry["thinSchema"]["properties"]["data"]["properties"]) == {"order", "plan", "product"}
    assert "iccid" in entry["schema"]["properties"]

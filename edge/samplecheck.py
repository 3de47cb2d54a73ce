"""Whether a sandbox sample event's ``data``, with the partner's own fields merged over it, is still an
event of its kind: what ``POST /v1/sandbox/events`` publishes must be shaped as a live event of that kind
is, by the catalog's JSON Schema of its ``data`` (svckit.catalog). The decision is pure: ``refusal``
gives the message of the 400, or "" when the merged data is valid.

jsonschema checks it, with the validators webhookd checks every published event with
(svckit.eventcheck): the catalog's schemas are whole JSON Schema 2020-12 (oneOf, not, pattern, const,
formats), and a check written against their ``properties`` alone would let through what they forbid,
such as a booking event that also names an eSIM order.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from svckit.catalog import schema
from svckit.eventcheck import validator

__all__ = ["refusal"]

# A value quoted in a message is cut to this many characters (the partner sent it; it is not a secret,
# but a megabyte of it is no message).
MAX_QUOTED = 80


def _quoted(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 3] + "..."


def _explain(error: ValidationError, kind: str, sent: Mapping[str, Any]) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if path and path.split(".", 1)[0] in sent:
        return (
            f"data.{path}: {_quoted(error.instance)} is not valid for a {kind} event "
            f"({error.validator}: {_rule(error)})"
        )
    # A rule across fields (oneOf, not), or one a field of the sample breaks only with what was sent.
    fields = ", ".join(sorted(sent))
    return (
        f"data ({fields}): these fields do not make a valid {kind} event with the sample's others "
        f"(GET /v1/event-types/{kind} shows its schema)"
    )


def _rule(error: ValidationError) -> str:
    """What the failed keyword asked for, short: the pattern, the enum, the minimum..."""
    if error.validator == "format":
        return f"a {error.validator_value}"
    if error.validator == "type":
        return f"a JSON {error.validator_value}"
    return _quoted(error.validator_value)


def refusal(kind: str, sample: Mapping[str, Any], sent: Mapping[str, Any]) -> str:
    """Why ``sent`` merged over ``sample`` (the ``data`` of a ``kind`` sample) is no ``kind`` event, or "".

    A field ``kind``'s schema does not have is named first (the usual mistake: a field of another kind,
    or a made-up one); then the first rule the merged data breaks, most specific first."""
    properties = kind_fields(kind)
    unknown = [k for k in sent if k not in properties]
    if unknown:
        return (
            f"data.{unknown[0]}: not a field of {kind} events; its fields are "
            f"{', '.join(properties)} (GET /v1/event-types/{kind})"
        )
    merged = {**sample, **sent}
    error = best_match(validator(kind).iter_errors(merged))
    return "" if error is None else _explain(error, kind, sent)


@cache
def kind_fields(kind: str) -> tuple[str, ...]:
    """The fields ``kind``'s ``data`` may have (its schema is closed: additionalProperties false)."""
    return tuple(schema(kind)["properties"])

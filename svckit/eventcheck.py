"""Whether a published event is an event of its kind: its ``state`` one of the kind's states (none given:
the kind's usual one, ``EventKind.state``) and its ``data`` valid by the kind's JSON Schema (draft 2020-12,
formats checked), as the event catalog (svckit.eventkinds) fixes them.

webhookd's PublishEvent refuses what this refuses, live and sandbox alike, whoever publishes; the client
library (svckit.clients.hooks) runs the same check before sending, so a product team's own unit tests find
a bad event without a server; the edge's sample check (edge.samplecheck) uses the same validators. One
validator per kind, compiled on first use.

A problem names its field: ``type``, ``state`` or ``data.<path>`` (``data.amount``: '12' is not of type
'integer'). An unknown field is named first (the usual mistake: snake_case, or a field of another kind).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match

from svckit.eventkinds import EVENT_KINDS, KINDS, schema

__all__ = ["MAX_QUOTED", "EventProblem", "event_problem", "resolve_state", "validator"]

# A value quoted in a message is cut to this many characters (a megabyte of it is no message).
MAX_QUOTED = 80
MAX_MESSAGE = 300


@dataclass(frozen=True, slots=True)
class EventProblem:
    field: str  # "type", "state" or "data..." (ErrorInfo metadata ``field``)
    message: str  # what is wrong with it

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@cache
def validator(kind: str) -> Draft202012Validator:
    """The compiled validator of ``kind``'s ``data`` (the test kind included)."""
    return Draft202012Validator(schema(kind), format_checker=FormatChecker())


def quoted(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 3] + "..."


def resolve_state(kind: str, state: str) -> str:
    """The ``state`` an event of a known ``kind`` carries: the one given, or the kind's usual one."""
    return state or KINDS[kind].state


def event_problem(kind: str, state: str, data: Mapping[str, Any]) -> EventProblem | None:
    """What makes (``kind``, ``state``, ``data``) no event of the catalog, or None. ``state`` "" is the
    kind's usual state (``resolve_state``)."""
    entry = KINDS.get(kind)
    if entry is None:
        return EventProblem(
            "type", f"unknown event kind {quoted(kind)}; known kinds: {', '.join(EVENT_KINDS)}"
        )
    if state and state not in entry.states:
        states = ", ".join(entry.states)
        return EventProblem("state", f"{quoted(state)} is not a state of {kind} events (states: {states})")
    return data_problem(kind, data)


def data_problem(kind: str, data: Mapping[str, Any]) -> EventProblem | None:
    """What makes ``data`` no ``data`` of ``kind``, or None."""
    properties = validator(kind).schema["properties"]
    unknown = [name for name in data if name not in properties]
    if unknown:
        return EventProblem(
            f"data.{unknown[0]}",
            f"not a field of {kind} events; its fields are {', '.join(properties)}",
        )
    error = best_match(validator(kind).iter_errors(dict(data)))
    if error is None:
        return None
    return EventProblem(_field(error), _message(error))


def _field(error: ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [n for n in error.validator_value if n not in error.instance]
        if missing:
            path = f"{path}.{missing[0]}" if path else str(missing[0])
    return f"data.{path}" if path else "data"


def _message(error: ValidationError) -> str:
    if error.validator in ("oneOf", "anyOf"):
        branches = [b.get("required", []) for b in error.validator_value if isinstance(b, dict)]
        if all(branches):
            return "needs exactly one of: " + " / ".join(" + ".join(b) for b in branches)
    if error.validator == "not":
        return "has fields that cannot go together (a booking's and an eSIM order's)"
    if error.validator == "required":
        return "is required"
    message = error.message
    if len(message) > MAX_MESSAGE:
        message = f"{quoted(error.instance)} does not match the schema's {error.validator!r} rule"
    return str(message)

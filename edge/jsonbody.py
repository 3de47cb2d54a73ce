"""Parsing what clients send as JSON (request bodies, stream messages). Pure.

Strict RFC 8259 JSON in UTF-8, bounded so no input can crash a handler:

- nesting deeper than ``MAX_DEPTH`` is refused (Python's parser would otherwise hit its recursion limit
  on ``[[[[...]]]]`` and end in a 500);
- a lone surrogate (``"\\ud800"``: valid JSON syntax, but not Unicode text) is refused: it cannot be
  encoded as UTF-8 for gRPC, a database or a product service;
- ``NaN``/``Infinity`` (a Python extension, not JSON) and integers longer than Python's digit limit are
  refused;
- a number past a double's range is refused (``1e400`` reads as infinity, which no JSON encoder writes
  back). An integer is any size Python reads: a field the edge itself reads has its own range, checked by
  its handler (``edge.convert.int_field``: 400, never a proto field's overflow), and a product body's
  other fields go to the product service as they came (the OpenAPI document allows them).

``JsonProblem.kind`` tells the stream which close code fits: ``unicode`` (1007, data inconsistent with
a text message), ``depth`` (1008, a policy limit); ``syntax`` is answered with an error frame.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64


class JsonProblem(ValueError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _refuse_constant(name: str) -> Any:
    raise JsonProblem("syntax", f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JsonProblem("syntax", "a number out of range: past a double's")
    return value


def _check(value: Any) -> None:
    """Depth and text of a parsed value, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _text(item)
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise JsonProblem("depth", f"JSON nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    _text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def _text(s: str) -> None:
    if s.isascii():
        return
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonProblem("unicode", "a JSON string holds a lone surrogate (not Unicode text)") from None


def parse_json(raw: bytes | str) -> Any:
    """The JSON value of ``raw``, or JsonProblem saying what is wrong."""
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise JsonProblem("unicode", "JSON must be UTF-8 text") from None
    else:
        _text(raw)
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, parse_float=_float)
    except RecursionError:
        raise JsonProblem("depth", f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except JsonProblem:
        raise
    except ValueError as exc:
        raise JsonProblem("syntax", f"not valid JSON: {exc}") from None
    _check(value)
    return value

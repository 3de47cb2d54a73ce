"""Content filters on events: the operator language of Hookdeck's simple-json-match (MIT), as Hookdeck
Outpost filters with it, evaluated over an event's ``{id, type, createdAt, data}`` (``filter_document``).
Pure, standard library only; ``svckit.filtercheck`` validates a filter before it is saved.

A filter is JSON. A plain value matches an equal value; an object matches when each of its keys
matches the document's field of that name (missing field: no match, unless ``{"$exist": false}``);
an array in the document matches when one of its items does (a filter array: when each of its
entries is matched by some item). Operators: ``$eq $neq $gt $gte $lt $lte $in $nin $startsWith
$endsWith $exist $or $and $not``, and ``$ref`` (another field's value, by path).

The evaluation follows the library's own (``src/index.ts`` at commit 988ca8d) step by step, so its 121
cases and 12 ``$not`` cases (tests/data/simple_json_match) give the same answers. Where JavaScript's
loose typing would decide, this module is strict instead (each difference is tested in
tests/unit/test_jsonmatch.py and written in docs/webhooks.md "Filters"):

- equality never converts types: ``"1"`` is not ``1``, ``true`` is not ``1`` (JavaScript's ``==`` would);
- ``$gt $gte $lt $lte`` compare two numbers or two strings; a number against a string is no match
  (JavaScript converts the string to a number);
- ``$eq``/``$neq`` between objects ignore key order (the library compares their ``JSON.stringify``);
- a filter of ``null`` where an object is expected is no match, as the library's TypeError is.

Hostile filters are bounded twice: ``svckit.filtercheck`` refuses deep, large or long-listed filters on
save, and every evaluation here stops after ``MAX_STEPS`` steps or ``MAX_DEPTH`` levels, which counts as
no match: the same filter on the same event always answers the same. No regular expression is built
from a filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

# The operators that compare one value (the library's ``operator_keys``); $or, $and, $not and $ref are
# handled by the walk itself.
VALUE_OPERATORS: Final = (
    "$eq",
    "$neq",
    "$in",
    "$nin",
    "$startsWith",
    "$endsWith",
    "$gte",
    "$gt",
    "$lte",
    "$lt",
    "$exist",
)
OPERATORS: Final = (*VALUE_OPERATORS, "$or", "$and", "$not", "$ref")

# Work bounds of one evaluation: walk steps and nesting levels (a saved filter is far inside both).
MAX_STEPS: Final = 2_000
MAX_DEPTH: Final = 200


class _Missing:
    """JavaScript's ``undefined``: the value of a field the document does not have."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


class _Fail(Exception):
    """The library's thrown errors: the nearest enclosing match answers False."""


class _Exhausted(Exception):
    """Past MAX_STEPS or MAX_DEPTH: the whole evaluation answers False."""


def filter_document(event_id: str, kind: str, created: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """What a filter sees of an event."""
    return {"id": event_id, "type": kind, "createdAt": created, "data": dict(data)}


def document_of_envelope(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """``filter_document`` of a delivered envelope (``id``, ``type``, ``created``, ``data``)."""
    data = envelope.get("data")
    return filter_document(
        str(envelope.get("id", "")),
        str(envelope.get("type", "")),
        str(envelope.get("created", "")),
        data if isinstance(data, Mapping) else {},
    )


class StepBudget:
    """Steps several evaluations share (webhookd: every filter one publish runs), so that the work of one
    publish is bounded as one evaluation's is, however many endpoints filter it. Spent: every later
    evaluation answers False, as an evaluation past MAX_STEPS does."""

    def __init__(self, steps: int = MAX_STEPS) -> None:
        self.left = steps


def matches(document: Any, flt: Any, budget: StepBudget | None = None) -> bool:
    """Does ``document`` (parsed JSON) match the filter ``flt`` (parsed JSON)? Never raises."""
    limit = MAX_STEPS if budget is None else min(MAX_STEPS, budget.left)
    walk = _Walk(limit)
    try:
        return walk.match(document, flt, MISSING, ())
    except (_Exhausted, RecursionError):
        return False
    finally:
        if budget is not None:
            budget.left = max(0, budget.left - walk.steps)


# -- JSON types as JavaScript sees them ----------------------------------------------------------------------


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_primitive(v: Any) -> bool:
    return v is None or isinstance(v, str | bool | int | float)


def _type_of(v: Any) -> str:
    if v is MISSING:
        return "undefined"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if _is_number(v):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list | tuple):
        return "array"
    return "object"


def _truthy(v: Any) -> bool:
    """JavaScript truthiness (objects and arrays, even empty, are true)."""
    if v is MISSING or v is None or v is False:
        return False
    if _is_number(v):
        return bool(v) and v == v  # 0 and NaN are false
    if isinstance(v, str):
        return v != ""
    return True


def _same(a: Any, b: Any) -> bool:
    """Equality of two JSON values without type conversion (1 == 1.0; objects in any key order)."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    ta, tb = _type_of(a), _type_of(b)
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if ta == "object":
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _entries(schema: Any) -> list[tuple[str, Any]]:
    """``Object.entries``: an array's are its indexes as strings."""
    if isinstance(schema, Mapping):
        return list(schema.items())
    if isinstance(schema, list | tuple):
        return [(str(i), v) for i, v in enumerate(schema)]
    return []


def _get(schema: Any, key: str) -> Any:
    """``schema[key]`` on an object (MISSING when absent); on ``null`` JavaScript throws."""
    if schema is None:
        raise _Fail("property of null")
    if isinstance(schema, Mapping):
        return schema.get(key, MISSING)
    return MISSING


def _js_string(v: Any) -> str:
    """``String(v)`` for a number, as ``"abc".includes(12)`` uses it."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    return str(v)


# -- the operators (the library's ``operators.ts``) --------------------------------------------------------


def _check(value: Any, types: Sequence[str]) -> None:
    if _type_of(value) not in types:
        raise _Fail("unsupported type")


def _op_eq(v: Any, compare: Any) -> bool:
    return _same(v, compare)


def _op_in(v: Any, compare: Any) -> bool:
    _check(compare, ("array", "string", "number"))
    _check(v, ("number", "string", "boolean", "null"))
    if isinstance(compare, list | tuple):
        for c in compare:
            _check(c, ("number", "string"))
        return any(_same(v, c) for c in compare)
    if not isinstance(v, str):
        raise _Fail("includes of a non-string")  # (5).includes: TypeError
    return _js_string(compare) in v


def _op_affix(v: Any, compare: Any, ends: bool) -> bool:
    _check(v, ("string",))
    _check(compare, ("string", "array"))
    options = compare if isinstance(compare, list | tuple) else [compare]
    for c in options:
        _check(c, ("string",))
    return any(v.endswith(c) if ends else v.startswith(c) for c in options)


def _op_order(v: Any, compare: Any, op: str) -> bool:
    _check(v, ("string", "number"))
    _check(compare, ("string", "number"))
    if _is_number(v) != _is_number(compare):
        return False  # strict: no string-to-number conversion
    if op == "$gt":
        return bool(v > compare)
    if op == "$gte":
        return bool(v >= compare)
    if op == "$lt":
        return bool(v < compare)
    return bool(v <= compare)


def _op_exist(v: Any, compare: Any) -> bool:
    _check(compare, ("boolean",))
    return (compare is True and v is not MISSING) or (compare is False and v is MISSING)


def apply_operator(op: str, v: Any, compare: Any) -> bool:
    """One value operator; raises _Fail where the library's throws (the caller counts it a mismatch)."""
    if op == "$eq":
        return _op_eq(v, compare)
    if op == "$neq":
        return not _op_eq(v, compare)
    if op == "$in":
        return _op_in(v, compare)
    if op == "$nin":
        return not _op_in(v, compare)
    if op in ("$startsWith", "$endsWith"):
        return _op_affix(v, compare, op == "$endsWith")
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return _op_order(v, compare, op)
    return _op_exist(v, compare)


# -- $ref paths ---------------------------------------------------------------------------------------------


def parse_path(path: str) -> list[str | int]:
    """A ``$ref`` path: ``a.b``, ``a[1].b``, ``[0].b``, optionally after ``$``; ValueError otherwise.
    (The library hands it to a JSONPath engine; this is the part of JSONPath a field reference needs.)"""
    if path.startswith("$"):
        path = path[1:]
        if path.startswith("."):
            path = path[1:]
    steps: list[str | int] = []
    i, n = 0, len(path)
    if n == 0:
        raise ValueError("empty path")
    expect_name = not path.startswith("[")
    while i < n:
        if path[i] == "[":
            close = path.find("]", i)
            if close < 0 or not path[i + 1 : close].isdigit() or not path[i + 1 : close].isascii():
                raise ValueError(f"bad index at {i}")
            steps.append(int(path[i + 1 : close]))
            i = close + 1
            expect_name = False
            continue
        if path[i] == ".":
            if expect_name:
                raise ValueError(f"unexpected '.' at {i}")
            i += 1
            expect_name = True
            continue
        if not expect_name:
            raise ValueError(f"unexpected {path[i]!r} at {i}")
        j = i
        while j < n and path[j] not in ".[]" and path[j] not in "*?()@$'\" ":
            j += 1
        if j == i:
            raise ValueError(f"unexpected {path[i]!r} at {i}")
        steps.append(path[i:j])
        i, expect_name = j, False
    if expect_name:
        raise ValueError("path ends with '.'")
    return steps


def _resolve(root: Any, reference: Any, indexes: Sequence[int]) -> Any:
    """The value at ``reference`` in the document (``[$index]``: the current array positions, outermost
    first), or None where there is none, as the library's ``getReferenceValueInInput``."""
    if not isinstance(reference, str):
        raise _Fail("Invalid Reference")
    if "[$index]" in reference:
        for index in indexes:
            reference = reference.replace("$index", str(index), 1)
    try:
        steps = parse_path(reference)
    except ValueError as exc:
        raise _Fail(str(exc)) from None
    value = root
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list | tuple) or step >= len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return None
            value = value[step]
    return value


# -- the walk (the library's ``matchJsonToSchema`` and ``recursivelyMatchValue``) ----------------------------


class _Walk:
    def __init__(self, limit: int = MAX_STEPS) -> None:
        self.limit = limit
        self.steps = 0
        self.depth = 0

    def _enter(self) -> None:
        self.steps += 1
        self.depth += 1
        if self.steps > self.limit or self.depth > MAX_DEPTH:
            raise _Exhausted

    def match(self, inp: Any, schema: Any, root: Any, indexes: tuple[int, ...]) -> bool:
        self._enter()
        try:
            return self._match(inp, schema, root, indexes)
        except _Fail:
            return False
        finally:
            self.depth -= 1

    def _match(self, inp: Any, schema: Any, root: Any, indexes: tuple[int, ...]) -> bool:
        if isinstance(schema, Mapping | list | tuple) or schema is None:
            negated = _get(schema, "$not")
            if _truthy(negated):
                result = self.match(inp, negated, root, indexes)
                if len(_entries(schema)) == 1 or result:
                    return not result
        if root is MISSING or not _truthy(root):
            root = inp
        if _is_primitive(inp) or isinstance(inp, list | tuple):
            return not self.mismatch(inp, schema, inp, indexes)
        if isinstance(schema, Mapping | list | tuple):
            for key, sub in _entries(schema):
                if key == "$not":
                    continue
                if key == "$or" and isinstance(sub, list | tuple):
                    if not any(self.match(inp, s, root, indexes) for s in sub):
                        return False
                    continue
                if key == "$and" and isinstance(sub, list | tuple):
                    if not all(self.match(inp, s, root, indexes) for s in sub):
                        return False
                    continue
                if not isinstance(inp, Mapping):
                    raise _Fail("property of undefined")  # the walk reached a missing field's fields
                value = inp.get(key, MISSING)
                if value is MISSING:
                    exist = (
                        _get(sub, "$exist") if isinstance(sub, Mapping | list | tuple) or sub is None else 0
                    )
                    if exist is not False:
                        return False
                if self.mismatch(value, sub, root, indexes):
                    return False
            return True
        return not self.mismatch(inp, schema, inp, indexes)

    def mismatch(self, inp: Any, schema: Any, root: Any, indexes: tuple[int, ...]) -> bool:
        self._enter()
        try:
            return self._mismatch(inp, schema, root, indexes)
        finally:
            self.depth -= 1

    def _ops(self, schema: Any) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in _entries(schema) if k in VALUE_OPERATORS]

    def _mismatch(self, inp: Any, schema: Any, root: Any, indexes: tuple[int, ...]) -> bool:
        if _is_primitive(schema):
            if _is_primitive(inp):
                return not _same(inp, schema)
            if isinstance(inp, list | tuple):
                return all(self.mismatch(v, schema, root, (*indexes, i)) for i, v in enumerate(inp))
            if isinstance(inp, Mapping):
                return True
        if isinstance(inp, list | tuple):
            if isinstance(schema, list | tuple):
                return any(
                    all(self.mismatch(item, sub, root, (*indexes, i)) for i, item in enumerate(inp))
                    for sub in schema
                )
            ops = self._ops(schema)
            if ops:
                return any(self._op_fails(op, inp, value) for op, value in ops)
            return all(self.mismatch(v, schema, root, (*indexes, i)) for i, v in enumerate(inp))
        if isinstance(schema, Mapping | list | tuple) or schema is None:
            either = _get(schema, "$or")
            if _truthy(either) and isinstance(either, list | tuple):
                return not any(self.match(inp, s, root, indexes) for s in either)
            ref = _get(schema, "$ref")
            if _truthy(ref):
                return self.mismatch(inp, _resolve(root, ref, indexes), root, indexes)
            ops = self._ops(schema)
            if ops:
                for op, value in ops:
                    if isinstance(value, Mapping) and _truthy(value.get("$ref", MISSING)):
                        value = _resolve(root, value["$ref"], indexes)
                    if self._op_fails(op, inp, value):
                        return True
                return False
            if _is_primitive(inp):
                return True
            return not self.match(inp, schema, root, indexes)
        return True

    @staticmethod
    def _op_fails(op: str, inp: Any, value: Any) -> bool:
        try:
            return not apply_operator(op, inp, value)
        except _Fail:
            return True

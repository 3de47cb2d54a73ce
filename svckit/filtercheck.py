"""Whether a content filter (``svckit.jsonmatch``) may be saved on an endpoint: a pure decision, the
first problem found named by its path in the filter (``filter.data.product.$regex``).

Why each rule:
- the filter is an object whose top-level fields are the event's (``id``, ``type``, ``createdAt``,
  ``data``), or ``$or``/``$and``/``$not`` of such objects: any other field never matches, which is a
  mistake, not a wish;
- a key starting with ``$`` is one of the operators, with an operand of the type the operator reads
  (``$gt`` a number or a string, ``$in`` a string, a number or a list of them, ``$exist`` a boolean,
  ``$or``/``$and`` a non-empty list, ``$ref`` a field path): a misspelt ``$regex`` or ``$gt: [1]``
  would otherwise silently match nothing;
- size, nesting, list lengths and string lengths are bounded (``MAX_*``) so that one partner's filter
  costs every publish of its account little: a hostile filter (deep nesting, a 100,000-entry ``$in``)
  is refused here, before it is ever evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from svckit.jsonmatch import OPERATORS, parse_path

MAX_BYTES: Final = 8 * 1024  # the filter as compact JSON
MAX_DEPTH: Final = 12  # objects and lists inside each other
MAX_NODES: Final = 400  # values of every kind, containers included
MAX_LIST: Final = 100  # entries of one list ($in, $or, ...)
MAX_STRING: Final = 512  # characters of a string or a key
DOCUMENT_FIELDS: Final = ("id", "type", "createdAt", "data")

_ORDERED: Final = ("$gt", "$gte", "$lt", "$lte")
_LISTS: Final = ("$or", "$and")


@dataclass(frozen=True, slots=True)
class FilterProblem:
    path: str  # where, from "filter"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class FilterError(ValueError):
    def __init__(self, problem: FilterProblem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def parse_filter(text: str) -> Any:
    """The filter a caller sent as JSON text, checked (FilterError), or None for "" (no filter)."""
    if not text.strip():
        return None
    if len(text.encode()) > MAX_BYTES * 4:
        raise FilterError(FilterProblem("filter", f"is larger than {MAX_BYTES} bytes"))
    try:
        flt = json.loads(text)
    except (ValueError, RecursionError):
        raise FilterError(FilterProblem("filter", "is not valid JSON")) from None
    check_filter(flt)
    return flt


def canonical(flt: Any) -> str:
    """How a checked filter is stored and sent: compact JSON, keys in the order given."""
    return json.dumps(flt, separators=(",", ":"), ensure_ascii=False)


def check_filter(flt: Any) -> None:
    """Raise FilterError with the first problem of ``flt`` (parsed JSON), or return."""
    problem = filter_problem(flt)
    if problem is not None:
        raise FilterError(problem)


def filter_problem(flt: Any) -> FilterProblem | None:
    """The first problem of ``flt`` (parsed JSON), or None when it may be saved."""
    if not isinstance(flt, Mapping):
        return FilterProblem("filter", 'must be a JSON object, e.g. {"type": "booking.confirmed"}')
    if not flt:
        return FilterProblem("filter", "is empty; send null (or omit it) for no filter")
    try:
        size = len(canonical(flt).encode())
    except (ValueError, RecursionError):
        return FilterProblem("filter", f"nests deeper than {MAX_DEPTH} levels")
    if size > MAX_BYTES:
        return FilterProblem("filter", f"is {size} bytes as compact JSON; at most {MAX_BYTES}")
    walk = _Check()
    try:
        walk.document(flt, "filter", 1)
    except FilterError as exc:
        return exc.problem
    return None


class _Check:
    def __init__(self) -> None:
        self.nodes = 0

    def _fail(self, path: str, message: str) -> None:
        raise FilterError(FilterProblem(path, message))

    def _count(self, path: str, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self._fail(path, f"the filter has more than {MAX_NODES} values")
        if depth > MAX_DEPTH:
            self._fail(path, f"nests deeper than {MAX_DEPTH} levels")

    def document(self, flt: Any, path: str, depth: int) -> None:
        """A filter over the whole event: its fields, or $or/$and/$not of such filters."""
        self._count(path, depth)
        if not isinstance(flt, Mapping):
            self._fail(path, "must be an object of the event's fields (id, type, createdAt, data)")
        for key, sub in flt.items():
            here = f"{path}.{key}"
            if key in _LISTS:
                for i, entry in enumerate(self._list(sub, here, depth)):
                    self.document(entry, f"{here}[{i}]", depth + 2)
            elif key == "$not":
                self.document(sub, here, depth + 1)
            elif key.startswith("$"):
                self._operator(key, sub, here, depth)
            elif key not in DOCUMENT_FIELDS:
                self._fail(
                    here,
                    f"the event has no field {key!r}; filter on {', '.join(DOCUMENT_FIELDS)} "
                    "(the event's own fields are under data)",
                )
            else:
                self.value(sub, here, depth + 1)

    def _list(self, sub: Any, path: str, depth: int) -> list[Any]:
        self._count(path, depth + 1)
        if not isinstance(sub, list) or not sub:
            self._fail(path, "must be a non-empty list of conditions")
        if len(sub) > MAX_LIST:
            self._fail(path, f"has {len(sub)} entries; at most {MAX_LIST}")
        return list(sub)

    def _string(self, value: str, path: str) -> None:
        if len(value) > MAX_STRING:
            self._fail(path, f"a string of {len(value)} characters; at most {MAX_STRING}")

    def value(self, sub: Any, path: str, depth: int) -> None:
        """A condition on a value: a plain value, a list, or an object of fields and operators."""
        self._count(path, depth)
        if isinstance(sub, str):
            self._string(sub, path)
        elif isinstance(sub, list):
            if len(sub) > MAX_LIST:
                self._fail(path, f"has {len(sub)} entries; at most {MAX_LIST}")
            for i, entry in enumerate(sub):
                self.value(entry, f"{path}[{i}]", depth + 1)
        elif isinstance(sub, Mapping):
            for key, inner in sub.items():
                here = f"{path}.{key}"
                self._string(key, here)
                if key in _LISTS:
                    for i, entry in enumerate(self._list(inner, here, depth)):
                        self.value(entry, f"{here}[{i}]", depth + 2)
                elif key == "$not":
                    self.value(inner, here, depth + 1)
                elif key.startswith("$"):
                    self._operator(key, inner, here, depth)
                else:
                    self.value(inner, here, depth + 1)

    def _operator(self, op: str, operand: Any, path: str, depth: int) -> None:
        if op not in OPERATORS:
            self._fail(path, f"unknown operator {op}; operators: {' '.join(OPERATORS)}")
        if op == "$ref":
            self._ref(operand, path, depth)
            return
        if isinstance(operand, Mapping) and set(operand) == {"$ref"} and op != "$exist":
            self._ref(operand["$ref"], f"{path}.$ref", depth + 1)
            return
        self._count(path, depth + 1)
        kind = _kind(operand)
        if op in _ORDERED and kind not in ("number", "string"):
            self._fail(path, f"{op} compares with a number or a string, not {kind}")
        if op in ("$in", "$nin"):
            self._list_of(operand, path, op, ("number", "string"), allow_single=("number", "string"))
        if op in ("$startsWith", "$endsWith"):
            self._list_of(operand, path, op, ("string",), allow_single=("string",))
        if op == "$exist" and kind != "boolean":
            self._fail(path, f"$exist takes true or false, not {kind}")
        if op in ("$eq", "$neq"):
            self.value(operand, path, depth + 1)
        elif isinstance(operand, str):
            self._string(operand, path)

    def _list_of(
        self, operand: Any, path: str, op: str, items: tuple[str, ...], allow_single: tuple[str, ...]
    ) -> None:
        kind = _kind(operand)
        if kind in allow_single:
            return
        if kind != "array":
            self._fail(path, f"{op} takes a {' or '.join(allow_single)} or a list of them, not {kind}")
        if len(operand) > MAX_LIST:
            self._fail(path, f"has {len(operand)} entries; at most {MAX_LIST}")
        for i, entry in enumerate(operand):
            self.nodes += 1
            if _kind(entry) not in items:
                self._fail(f"{path}[{i}]", f"{op} lists {' or '.join(items)} values, not {_kind(entry)}")
            if isinstance(entry, str):
                self._string(entry, f"{path}[{i}]")
        if self.nodes > MAX_NODES:
            self._fail(path, f"the filter has more than {MAX_NODES} values")

    def _ref(self, operand: Any, path: str, depth: int) -> None:
        self._count(path, depth + 1)
        if not isinstance(operand, str):
            self._fail(path, f'$ref takes a field path such as "data.booking", not {_kind(operand)}')
        self._string(operand, path)
        try:
            parse_path(operand.replace("$index", "0"))
        except ValueError as exc:
            self._fail(path, f"$ref {operand!r} is not a field path ({exc})")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"

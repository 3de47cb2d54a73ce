"""The request log's rules, pure (no I/O): what a record may hold, how long it is kept and how many an
account may file a day.

The edge files every partner request it answered for a known key (metadata only: never a body, a header
value, a query string or a secret) through AuthService.RecordRequests; the portal's Request log page
reads them with ListRequests. Records are kept ``RETENTION``; an account files at most ``DAILY_BOUND`` a
UTC day, beyond which records are dropped and counted (``admit``), so one tenant cannot fill the disk.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from svckit.vocabulary import Environment

# How long a record is kept.
RETENTION = dt.timedelta(days=30)
# Records an account files per UTC day (both environments); the rest of that day's are dropped, counted.
DAILY_BOUND = 100_000
# The longest path kept (characters); a longer one is cut.
MAX_PATH = 200
# Records in one RecordRequests call.
MAX_BATCH = 1000
# The longest error type and method kept.
MAX_ERROR_TYPE = 64
MAX_METHOD = 10
# Seconds between purges of records older than RETENTION (authsvc.RequestLogPurge).
PURGE_INTERVAL = 3600.0


@dataclass(frozen=True, slots=True)
class RequestRecord:
    request_id: str
    account_id: str
    environment: Environment
    key_id: str
    key_hint: str
    method: str
    path: str
    status: int
    error_type: str
    latency_ms: int
    occurred_at: dt.datetime


@dataclass(frozen=True, slots=True)
class RequestFilter:
    request_id: str = ""
    key_id: str = ""
    # The statuses listed: [low, high), or None for any.
    statuses: tuple[int, int] | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    # Insights' error cells link here: an error type, a method, and a route template of the edge's route
    # table ("/v1/hotels/offers/{offer_id}" or "/v1/hotels/offers/<offer_id>": each parameter one path
    # segment) that the path matches.
    error_type: str = ""
    method: str = ""
    route: str = ""


# A parameter: ``{name}`` (the route table's) or ``<name>`` / ``<name:type>`` (the edge's routes, as the
# usage counts name them).
_PARAM = re.compile(r"\{[^{}/]*\}|<[^<>/]*>")
# A route template: absolute, segments of path characters or one parameter each.
_TEMPLATE = re.compile(
    r"^(/([A-Za-z0-9._~!$&'()*+,;=:@-]+|\{[A-Za-z0-9_]+\}|<[A-Za-z0-9_]+(:[A-Za-z0-9_]+)?>))+/?$"
)


def valid_route(template: str) -> bool:
    return len(template) <= MAX_PATH and bool(_TEMPLATE.match(template))


def route_like(template: str) -> str:
    """A SQL LIKE pattern (escape character ``\\``) that every path matching ``template`` matches: its
    literal parts escaped, each parameter ``%``. It may match more (``%`` crosses a ``/``);
    ``route_matches`` decides."""
    parts = _PARAM.split(template)
    escaped = [p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for p in parts]
    return "%".join(escaped)


def route_matches(template: str, path: str) -> bool:
    """Does ``path`` match the route ``template``, each parameter standing for exactly one non-empty
    segment?"""
    parts = _PARAM.split(template)
    pattern = "[^/]+".join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, path) is not None


def admit(filed: int, offered: int, bound: int = DAILY_BOUND) -> tuple[int, int]:
    """(kept, dropped) of ``offered`` records of an account whose day already counts ``filed`` offered
    records (kept or not): the first ``bound`` of the day are kept, every later one dropped."""
    if offered <= 0:
        return 0, 0
    room = max(0, bound - max(0, filed))
    kept = min(offered, room)
    return kept, offered - kept


def statuses(status: int, status_class: int) -> tuple[int, int] | None:
    """The status range a ListRequests asks for: an exact status, a class (2 -> 200..299) or any (None).
    ValueError names the field of a status or class that is not one."""
    if status:
        if not 100 <= status <= 599:
            raise ValueError("status: an HTTP status, 100 to 599")
        if status_class and status // 100 != status_class:
            raise ValueError("status_class: the status is not of this class")
        return status, status + 1
    if status_class:
        if not 1 <= status_class <= 5:
            raise ValueError("status_class: 1, 2, 3, 4 or 5")
        return status_class * 100, status_class * 100 + 100
    return None


def day_of(when: dt.datetime) -> str:
    """The UTC day a record counts against, YYYY-MM-DD."""
    return when.astimezone(dt.UTC).date().isoformat()


def cut_path(path: str) -> str:
    """The path as kept: without a query string, at most MAX_PATH characters."""
    return path.split("?", 1)[0][:MAX_PATH]

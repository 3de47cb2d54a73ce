"""The rows one queue cycle carries: what a claim answers (``Claimed``), a cycle's results as statement
parameters (``ResultRows``, built before the storage hop), and the notice and alert rows they make. The
statements that take them are ``webhookd._queue_sql``'s."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from svckit import catalog
from svckit.ids import new_id
from svckit.webhook_status import DeliveryStatus as D
from svckit.webhook_status import DestinationType
from webhookd._delivery_counts import count_rows
from webhookd._destination_settings import shown_target
from webhookd._repository import Alert, DeliveryResult
from webhookd._rows import attempt_row
from webhookd._times import us


@dataclass(slots=True)
class Claimed:
    """What a claim answers, as rows: deliveries (``DELIVERY_COLUMNS``), their event bodies by event id,
    their endpoints' rows (``ENDPOINT_COLUMNS``) by endpoint id (a deleted endpoint's is missing)."""

    rows: Sequence[Sequence[Any]]
    bodies: dict[str, bytes]
    endpoints: dict[str, Sequence[Any]]


NOTHING_CLAIMED = Claimed((), {}, {})


class ResultRows:
    """One cycle's results as statement parameters, built before the storage hop."""

    __slots__ = (
        "attempts", "counts", "deliveries", "disabling", "exhausted", "failing", "finished", "levels",
        "recovered", "retried", "t",
    )  # fmt: skip

    def __init__(self, results: Sequence[DeliveryResult], now_us: int) -> None:
        self.t = now_us
        self.attempts: list[tuple[Any, ...]] = []
        self.deliveries: list[tuple[Any, ...]] = []  # (status, next, id, inc)
        self.finished: list[tuple[str]] = []  # (id,): done, their queue rows go
        self.retried: list[tuple[Any, ...]] = []  # (next, id, inc): due again
        self.disabling: list[tuple[str, str]] = []  # (endpoint id, reason)
        failing: set[str] = set()
        self.levels: dict[str, tuple[int, int, str]] = {}  # endpoint id -> (level, attempts, error)
        self.recovered: set[str] = set()
        self.exhausted: list[tuple[Any, ...]] = []  # ``insert_notices`` rows
        for r in results:
            if r.attempt is not None:
                self.attempts.append(attempt_row(r.attempt))
                a = r.attempt
                if r.failing_level and r.failing_level > self.levels.get(r.endpoint_id, (0, 0, ""))[0]:
                    self.levels[r.endpoint_id] = (r.failing_level, a.attempt_number, a.error)
                if r.recovered:
                    self.recovered.add(r.endpoint_id)
                if r.exhausted:
                    data = catalog.delivery_exhausted(
                        r.endpoint_id, r.delivery_id, a.event_id, a.attempt_number, a.error
                    )
                    self.exhausted.append(
                        notice_row(
                            (a.account_id, a.environment), r.endpoint_id, "delivery.exhausted", data, now_us
                        )
                    )
            nxt = us(r.next_attempt_at) if r.next_attempt_at else None
            inc = 1 if r.counts_attempt else 0
            self.deliveries.append((str(r.status), nxt, r.delivery_id, inc))
            if r.status == D.PENDING:
                self.retried.append((now_us if nxt is None else nxt, r.delivery_id, inc))
            else:
                self.finished.append((r.delivery_id,))
            if r.disable_endpoint:
                self.disabling.append((r.endpoint_id, r.disabled_reason))
            if r.status != D.SUCCEEDED:
                failing.add(r.endpoint_id)
        self.failing = sorted(failing)
        # The attempts' exact counts per endpoint and outcome (webhookd._delivery_counts).
        self.counts = count_rows(r.attempt for r in results if r.attempt is not None)

    def holds(self) -> list[tuple[int, str]]:
        """``hold``'s parameters for each endpoint that saw a failure."""
        return [(self.t, endpoint_id) for endpoint_id in self.failing]


def notice_row(
    scope: Sequence[Any], endpoint_id: str, kind: str, data: dict[str, Any], now_us: int
) -> tuple[Any, ...]:
    """An ``insert_notices`` row; ``scope`` starts with (account id, environment)."""
    return (new_id("ntc"), scope[0], scope[1], endpoint_id, kind, json.dumps(data), now_us)


def targeted(row: Sequence[Any] | None) -> tuple[str, str, str] | None:
    """(account id, environment, where its deliveries go) of an endpoint ``disable_endpoint``,
    ``raise_failing`` or ``clear_failing`` returned (account, environment, url, destination type and
    settings): a broker endpoint has no URL, its alert e-mail and operational events name its exchange
    and routing key or subject instead (``_destination_settings.shown_target``, never a credential)."""
    if row is None:
        return None
    account_id, environment, url, kind, clear = row
    return account_id, environment, shown_target(DestinationType(kind), url, clear)


def alert_row(endpoint_id: str, reason: str, disabled: Sequence[Any], now_us: int) -> tuple[Any, ...]:
    """``insert_alert``'s parameters for an endpoint ``disable_endpoint`` just disabled (its returned row)."""
    return (new_id("alrt"), disabled[0], disabled[1], endpoint_id, disabled[2], reason, now_us)


def alerts_of(rows: Sequence[tuple[Any, ...]], now: dt.datetime) -> list[Alert]:
    """Alerts from ``insert_alert``'s parameter rows."""
    return [Alert(a[0], a[1], a[2], a[3], a[4], a[5], now) for a in rows]

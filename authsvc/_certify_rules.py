"""The certification checks: pure rules (no I/O) over what a certification run recorded.

A run belongs to one account's sandbox and one of its sandbox keys. While it is open the edge files every
request of that key (``RunRequest``: metadata, plus digests of the Idempotency-Key and of the body, never
their values) and injects faults into the key's POSTs by the published schedule (``fault_for``); webhookd
sends probe deliveries to the account's endpoints (``Probe``) and the account's ordinary deliveries are
counted (``Delivery``). ``evaluate`` answers every check with its evidence; a report passes when every
check does. Why each rule reads as it does:

- ``receiver_accepts_valid``: a receiver that refuses a correctly signed delivery, or answers it later
  than ``RECEIVER_DEADLINE``, makes the platform retry and, after days, disable the endpoint.
- ``receiver_refuses_wrong_signature`` / ``receiver_refuses_stale``: a receiver that accepts these accepts
  forged or replayed events. A 4xx is the answer asked for; a 5xx or no answer reads as "try later".
- ``receiver_tolerates_duplicate``: the same event id delivered twice must be answered 2xx both times
  (delivery is at least once). That it was not processed twice cannot be seen from outside: the check
  says "answered 2xx", no more.
- ``idempotency_key_present``: every POST carries an Idempotency-Key (a retry without one can book twice).
- ``retry_reuses_key``: the retry of a POST answered an injected 503 or 504 carries the same
  Idempotency-Key and the same body. A later POST of the key to the same path with the same body or the
  same key is read as the retry; a POST that was not retried passes. A retry without any key is the
  previous check's failure, not this one's, so that each broken client fails exactly one check.
- ``honours_retry_after``: after an injected 429 the key's next request (probes aside) comes no sooner
  than its Retry-After.
- ``no_unauthorized_loop``: after a 401 the key is answered 401 at most ``MAX_REPEATS`` more times within
  ``REPEAT_WINDOW`` (a client hammering a revoked key is what gets sources blocked).
- ``no_quota_loop``: the same for 402 ``search_quota_exhausted``: the quota comes back at the UTC day's
  end, retrying sooner only spends requests.
- ``booking_flow``: search, offer, book and cancel of one product each answered 2xx at least once.
- ``webhook_kinds``: each event kind the account subscribes to was delivered at least once with 2xx.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Sequence

from svckit.certification import Fault, ProbeKind

# A receiver answers a probe within this.
RECEIVER_DEADLINE = dt.timedelta(seconds=10)
# After a 401 (or a 402 search_quota_exhausted) the key may be answered so at most MAX_REPEATS more
# times within REPEAT_WINDOW.
MAX_REPEATS = 3
REPEAT_WINDOW = dt.timedelta(minutes=1)


@dataclasses.dataclass(frozen=True, slots=True)
class RunRequest:
    """One request of the run's key, as the edge filed it. ``idempotency_key`` and ``body`` are digests
    ("" when absent); ``fault`` is the fault injected in place of the answer; ``probe`` that the GET
    carried PROBE_HEADER."""

    request_id: str
    method: str
    path: str
    status: int
    received_at: dt.datetime
    error_type: str = ""
    idempotency_key: str = ""
    body: str = ""
    fault: Fault | None = None
    retry_after: int = 0
    probe: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Probe:
    """One probe delivery and the receiver's answer (``status`` 0: none, within the deadline or at all)."""

    delivery_id: str
    kind: ProbeKind
    scheme: str
    status: int
    latency: dt.timedelta = dt.timedelta(0)


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    delivery_id: str
    kind: str
    status: int


@dataclasses.dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    passed: bool
    detail: str
    evidence: tuple[str, ...] = ()


CHECKS: tuple[str, ...] = (
    "receiver_accepts_valid",
    "receiver_refuses_wrong_signature",
    "receiver_refuses_stale",
    "receiver_tolerates_duplicate",
    "idempotency_key_present",
    "retry_reuses_key",
    "honours_retry_after",
    "no_unauthorized_loop",
    "no_quota_loop",
    "booking_flow",
    "webhook_kinds",
)


def _ok(status: int) -> bool:
    return 200 <= status < 300


def _probe_check(
    name: str, probes: Sequence[Probe], kind: ProbeKind, want_2xx: bool, deadline: dt.timedelta | None
) -> CheckResult:
    mine = [p for p in probes if p.kind is kind]
    if not mine:
        return CheckResult(name, False, f"no {kind.value} probe was answered: is an endpoint enabled?")
    if want_2xx:
        bad = [p for p in mine if not _ok(p.status) or (deadline is not None and p.latency > deadline)]
    else:
        bad = [p for p in mine if not 400 <= p.status < 500]
    if bad:
        answers = ", ".join(f"{p.delivery_id} ({p.scheme}): {p.status or 'no answer'}" for p in bad)
        want = "2xx" if want_2xx else "4xx"
        return CheckResult(name, False, f"expected {want}; got {answers}", tuple(p.delivery_id for p in bad))
    return CheckResult(
        name, True, f"{len(mine)} probe(s) answered as expected", tuple(p.delivery_id for p in mine)
    )


def _posts(requests: Sequence[RunRequest]) -> list[RunRequest]:
    return [r for r in requests if r.method == "POST"]


def idempotency_key_present(requests: Sequence[RunRequest]) -> CheckResult:
    name = "idempotency_key_present"
    posts = _posts(requests)
    missing = [r.request_id for r in posts if not r.idempotency_key]
    if missing:
        return CheckResult(
            name, False, f"{len(missing)} of {len(posts)} POSTs had no Idempotency-Key", tuple(missing)
        )
    if not posts:
        return CheckResult(name, False, "no POST was sent during the run")
    return CheckResult(name, True, f"all {len(posts)} POSTs carried an Idempotency-Key")


def retry_reuses_key(requests: Sequence[RunRequest]) -> CheckResult:
    name = "retry_reuses_key"
    ordered = sorted(requests, key=lambda r: r.received_at)
    faulted = [r for r in ordered if r.method == "POST" and r.fault in (Fault.UNAVAILABLE, Fault.TIMEOUT)]
    if not faulted:
        return CheckResult(name, False, "no POST was given a 503 or 504 during the run: send more POSTs")
    bad: list[str] = []
    retried = 0
    for first in faulted:
        retry = next(
            (
                r
                for r in ordered
                if r.received_at > first.received_at
                and r.method == "POST"
                and r.path == first.path
                and (
                    (first.body and r.body == first.body)
                    or (first.idempotency_key and r.idempotency_key == first.idempotency_key)
                )
            ),
            None,
        )
        if retry is None or not retry.idempotency_key:
            continue  # not retried, or retried without a key (idempotency_key_present's failure)
        retried += 1
        if retry.idempotency_key != first.idempotency_key or retry.body != first.body:
            bad += [first.request_id, retry.request_id]
    if bad:
        return CheckResult(name, False, "a retry changed its Idempotency-Key or its body", tuple(bad))
    return CheckResult(name, True, f"{retried} retried POST(s) reused key and body")


def honours_retry_after(requests: Sequence[RunRequest]) -> CheckResult:
    name = "honours_retry_after"
    ordered = sorted((r for r in requests if not r.probe), key=lambda r: r.received_at)
    limited = [i for i, r in enumerate(ordered) if r.status == 429 and r.retry_after > 0]
    if not limited:
        return CheckResult(name, False, "no request was answered 429 during the run: send more POSTs")
    bad: list[str] = []
    for i in limited:
        first = ordered[i]
        if i + 1 < len(ordered):
            after = ordered[i + 1]
            if after.received_at - first.received_at < dt.timedelta(seconds=first.retry_after):
                bad += [first.request_id, after.request_id]
    if bad:
        return CheckResult(name, False, "a request came sooner than the 429's Retry-After", tuple(bad))
    return CheckResult(name, True, f"{len(limited)} 429(s) waited out")


def _no_loop(
    name: str, requests: Sequence[RunRequest], status: int, error_type: str, window: dt.timedelta
) -> CheckResult:
    hits = sorted(
        (r for r in requests if r.status == status and (not error_type or r.error_type == error_type)),
        key=lambda r: r.received_at,
    )
    for i, first in enumerate(hits):
        within = [r for r in hits[i + 1 :] if r.received_at - first.received_at <= window]
        if len(within) > MAX_REPEATS:
            evidence = tuple(r.request_id for r in [first, *within])
            return CheckResult(
                name,
                False,
                f"{len(within)} more {status} answers within {window.total_seconds():g} s of "
                f"{first.request_id}",
                evidence,
            )
    return CheckResult(name, True, f"{len(hits)} {status} answer(s), none repeated in a loop")


_STEPS = (
    ("search", "GET", re.compile(r"^/v1/(hotels|flights)/search$")),
    ("offer", "GET", re.compile(r"^/v1/(hotels|flights)/offers/[^/]+$")),
    ("book", "POST", re.compile(r"^/v1/(hotels|flights)/bookings$")),
    ("cancel", "POST", re.compile(r"^/v1/(hotels|flights)/bookings/[^/]+/cancel$")),
)


def booking_flow(requests: Sequence[RunRequest]) -> CheckResult:
    name = "booking_flow"
    for product in ("hotels", "flights"):
        seen: dict[str, str] = {}
        for r in sorted(requests, key=lambda r: r.received_at):
            for step, method, pattern in _STEPS:
                m = pattern.match(r.path)
                if m and m.group(1) == product and r.method == method and _ok(r.status):
                    seen.setdefault(step, r.request_id)
        if len(seen) == len(_STEPS):
            return CheckResult(
                name, True, f"{product}: search, offer, book and cancel", tuple(seen[s] for s, _, _ in _STEPS)
            )
    return CheckResult(name, False, "no product's search, offer, book and cancel were each answered 2xx")


def webhook_kinds(deliveries: Iterable[Delivery], subscribed: Iterable[str]) -> CheckResult:
    name = "webhook_kinds"
    wanted = sorted(set(subscribed))
    if not wanted:
        return CheckResult(name, False, "no endpoint subscribes to any event kind")
    got: dict[str, str] = {}
    for d in deliveries:
        if _ok(d.status):
            got.setdefault(d.kind, d.delivery_id)
    missing = [k for k in wanted if k not in got]
    if missing:
        return CheckResult(
            name, False, "never answered 2xx: " + ", ".join(missing) + " (svc trigger sends one)"
        )
    return CheckResult(name, True, f"{len(wanted)} kind(s) each answered 2xx", tuple(got[k] for k in wanted))


def evaluate(
    requests: Sequence[RunRequest],
    probes: Sequence[Probe],
    deliveries: Sequence[Delivery],
    subscribed: Iterable[str],
    repeat_window: dt.timedelta = REPEAT_WINDOW,
) -> tuple[CheckResult, ...]:
    """Every check, in CHECKS' order."""
    return (
        _probe_check("receiver_accepts_valid", probes, ProbeKind.VALID, True, RECEIVER_DEADLINE),
        _probe_check("receiver_refuses_wrong_signature", probes, ProbeKind.WRONG_SIGNATURE, False, None),
        _probe_check("receiver_refuses_stale", probes, ProbeKind.STALE_TIMESTAMP, False, None),
        _probe_check("receiver_tolerates_duplicate", probes, ProbeKind.DUPLICATE, True, None),
        idempotency_key_present(requests),
        retry_reuses_key(requests),
        honours_retry_after(requests),
        _no_loop("no_unauthorized_loop", requests, 401, "", repeat_window),
        _no_loop("no_quota_loop", requests, 402, "search_quota_exhausted", repeat_window),
        booking_flow(requests),
        webhook_kinds(deliveries, subscribed),
    )


def passed(results: Iterable[CheckResult]) -> bool:
    return all(r.passed for r in results)

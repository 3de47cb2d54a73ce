"""svckit.metrics' loop counters and histograms expose what prometheus_client's own types would."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from svckit.metrics import LoopCounter, LoopHistogram

BUCKETS = (0.001, 0.01, 0.1, 1.0)
# (value observed, how many times): on a bound, between bounds, above every bound, zero
OBSERVATIONS = [(0.0, 1), (0.001, 2), (0.005, 3), (0.1, 1), (0.5, 4), (7.0, 2)]


def _samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_counter_exposes_the_same_samples_as_prometheus_client() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopCounter("things_total", "Things done", ["kind", "code"], registry=ours)
    reference = Counter("things_total", "Things done", ["kind", "code"], registry=theirs)
    for labels, n in ((("a", "OK"), 3), (("b", "NOT_FOUND"), 1), (("a", "INTERNAL"), 2)):
        for _ in range(n):
            loop.labels(*labels).inc()
            reference.labels(*labels).inc()
    assert _samples(ours) == _samples(theirs)
    assert ("things_total", (("code", "OK"), ("kind", "a")), 3.0) in _samples(ours)


def test_unlabelled_counter() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    LoopCounter("plain_total", "Plain", registry=ours).inc(5)
    Counter("plain_total", "Plain", registry=theirs).inc(5)
    assert _samples(ours) == _samples(theirs)


def test_histogram_exposes_the_same_samples_as_prometheus_client() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopHistogram("took_seconds", "Time taken", ["method"], BUCKETS, registry=ours)
    reference = Histogram("took_seconds", "Time taken", ["method"], buckets=BUCKETS, registry=theirs)
    for value, n in OBSERVATIONS:
        for _ in range(n):
            loop.labels("Get").observe(value)
            reference.labels("Get").observe(value)
    loop.labels("Put").observe(0.02)
    reference.labels("Put").observe(0.02)
    assert _samples(ours) == _samples(theirs)
    assert ("took_seconds_bucket", (("le", "0.001"), ("method", "Get")), 3.0) in _samples(ours)
    assert ("took_seconds_count", (("method", "Get"),), 13.0) in _samples(ours)


def test_wrong_number_of_labels_is_refused() -> None:
    counter = LoopCounter("c_total", "C", ["a"], registry=None)
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("x", "y")
    histogram = LoopHistogram("h_seconds", "H", ["a"], BUCKETS, registry=None)
    with pytest.raises(ValueError, match="expected labels"):
        histogram.labels()

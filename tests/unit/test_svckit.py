from __future__ import annotations

import datetime as dt
import os

import grpc
import pytest

from svckit.errors import ERROR_KINDS, ServiceError, http_status, to_grpc_status
from svckit.ids import BASE62, TIME_CHARS, encode_base62, new_id, sortable_id
from svckit.logs import redact


@pytest.mark.parametrize(
    ("error_type", "status"),
    [
        ("missing_api_key", 401),
        ("invalid_api_key", 401),
        ("environment_mismatch", 401),
        ("missing_scope", 403),
        ("ip_not_allowed", 403),
        ("account_read_only", 403),
        ("missing_idempotency_key", 400),
        ("idempotency_key_reused", 422),
        ("idempotency_key_in_use", 409),
        ("invalid_request", 400),
        ("invalid_customer_ref", 400),
        ("search_quota_exhausted", 402),
        ("credit_exhausted", 402),
        ("not_acceptable", 406),
        ("not_found", 404),
        ("misdirected_request", 421),
        ("rate_limited", 429),
        ("service_unavailable", 503),
        ("internal_error", 500),
    ],
)
def test_decisions_error_table(error_type: str, status: int) -> None:
    assert http_status(error_type) == status


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError):
        ServiceError("x", type="no_such_type")


def test_grpc_status_carries_error_info() -> None:
    st = to_grpc_status(ServiceError("bad scope", type="invalid_request"))
    assert st.code == grpc.StatusCode.INVALID_ARGUMENT
    assert st.details == "bad scope"
    assert any(k == "grpc-status-details-bin" for k, _ in st.trailing_metadata)


def test_every_kind_has_a_grpc_code() -> None:
    assert all(isinstance(k.grpc_code, grpc.StatusCode) for k in ERROR_KINDS.values())


def test_ids_are_prefixed_and_unique() -> None:
    ids = {new_id("key") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(i.startswith("key_") and len(i) == 28 for i in ids)


def test_sortable_ids_are_unique_ordered_by_time_and_never_shared_with_a_forked_child() -> None:
    now = dt.datetime(2026, 11, 29, 8, 0, tzinfo=dt.UTC)
    ids = [sortable_id("att", now) for _ in range(5000)]  # many batches of drawn random parts
    assert len(set(ids)) == len(ids)
    ms = encode_base62(int(now.timestamp() * 1000), TIME_CHARS)
    assert all(i.startswith(f"att_{ms}") and len(i) == 28 and set(i[4:]) <= set(BASE62) for i in ids)
    assert len(sortable_id("att", now, 30)) == 34
    assert sortable_id("att", now + dt.timedelta(milliseconds=1)) > max(ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child's next id, then the parent's: the same undrawn part in both would be a dup
        os.write(write, sortable_id("att", now).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 100).decode() != sortable_id("att", now)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key svc_live_abcdefghijklmnop123 used", "key svc_live_[REDACTED] used"),
        ("svc_test_ABCDEFGH12345678", "svc_test_[REDACTED]"),
        ("secret whsec_aGVsbG8gd29ybGQgaGVsbG8=", "secret whsec_[REDACTED]"),
        ("key_abc svc_live_ hint", "key_abc svc_live_ hint"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected

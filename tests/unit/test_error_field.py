"""The field an error is about crosses gRPC in the ErrorInfo's metadata (svckit.errors), and a client reads it
from there (svckit.clients.errors.client_error), never guessing it from the message's text."""

from __future__ import annotations

import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from svckit.clients.errors import client_error
from svckit.errors import ServiceError, field_of, to_grpc_status


def rpc_error(error: ServiceError) -> AioRpcError:
    status = to_grpc_status(error)
    return AioRpcError(status.code, Metadata(), Metadata(*status.trailing_metadata), status.details)


@pytest.mark.parametrize(
    ("message", "metadata", "field", "shown"),
    [
        ("scopes: unknown scope 'x'", None, "scopes", "unknown scope 'x'"),  # the services' form
        ("data.customerRef: '' should be non-empty", None, "data.customerRef", "'' should be non-empty"),
        (
            "mode B accounts cannot publish this kind",
            {"field": "type"},
            "type",
            "mode B accounts cannot publish this kind",
        ),
        ("type: unknown event kind", {"field": "type"}, "type", "unknown event kind"),
        ("the key was revoked", None, "", "the key was revoked"),
        ("Note: see the docs", None, "", "Note: see the docs"),  # no field is capitalised
    ],
)
def test_the_field_travels_in_metadata(
    message: str, metadata: dict[str, str] | None, field: str, shown: str
) -> None:
    error = ServiceError(message, type="invalid_request", metadata=metadata)
    assert error.metadata.get("field", "") == field
    got = client_error(rpc_error(error))
    assert (got.type, got.field, got.message, got.detail) == ("invalid_request", field, shown, message)


def test_a_message_that_only_looks_like_a_field_is_not_one_to_the_client() -> None:
    """A peer that names no field in its metadata (another implementation, an older release): the client
    takes the text as it is, whatever it looks like."""
    error = ServiceError("retry: later", type="invalid_request", metadata={"field": ""})
    got = client_error(rpc_error(error))
    assert (got.field, got.message) == ("", "retry: later")


def test_field_of() -> None:
    assert [field_of(m) for m in ("a: b", "a.b_c: d", "A: b", "a b: c", "a:b", "")] == [
        "a",
        "a.b_c",
        "",
        "",
        "",
        "",
    ]


def test_a_status_without_error_info_has_no_field() -> None:
    got = client_error(AioRpcError(grpc.StatusCode.INVALID_ARGUMENT, Metadata(), Metadata(), "scopes: bad"))
    assert (got.type, got.field, got.message) == ("invalid_request", "", "scopes: bad")

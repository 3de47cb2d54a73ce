"""The status vocabulary: every proto status but UNSPECIFIED has exactly one StrEnum member, and back."""

from __future__ import annotations

import pytest

from svckit.prototables import DELIVERY_STATUS, ENDPOINT_STATUS, EnumTable
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from travel.webhooks.v1 import webhooks_pb2 as pb


@pytest.mark.parametrize(
    ("status", "proto_enum", "prefix", "derived"),
    [
        (DeliveryStatus, pb.DeliveryStatus, "DELIVERY_STATUS_", DELIVERY_STATUS),
        (EndpointStatus, pb.EndpointStatus, "ENDPOINT_STATUS_", ENDPOINT_STATUS),
    ],
)
def test_statuses_and_proto_enum_name_the_same_set(status, proto_enum, prefix, derived: EnumTable) -> None:  # type: ignore[type-arg]
    table = derived.names()
    named = {n for n in proto_enum.keys() if n != f"{prefix}UNSPECIFIED"}
    assert {proto_enum.Name(v) for v in table} == named
    assert sorted(table.values()) == sorted(m.value for m in status)
    assert all(type(v) is str for v in table.values())  # plain strings for JSON encoders


@pytest.mark.parametrize(
    ("value", "member"),
    [
        ("pending", DeliveryStatus.PENDING),
        ("held", DeliveryStatus.HELD),
        ("disabled", EndpointStatus.DISABLED),
    ],
)
def test_stored_strings_read_back_as_members(value, member):
    assert type(member)(value) is member and member == value


def test_an_unknown_stored_status_is_refused() -> None:
    with pytest.raises(ValueError):
        DeliveryStatus("sent")

"""Every proto enum <-> ``svckit.vocabulary`` word, derived from the names (``KEY_STATUS_REVOKED`` <->
``KeyStatus.REVOKED``), never written by number. A member without its proto twin fails at import."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from svckit.signing import SignatureScheme
from svckit.vocabulary import (
    AccountMode,
    AccountStatus,
    AttemptOutcome,
    DeliveryStatus,
    EndpointStatus,
    Environment,
    KeyStatus,
    UserRole,
)
from svckit.webhook_status import DeliveryOrder, DestinationType, PayloadMode
from travel.auth.v1 import auth_pb2, identity_pb2
from travel.webhooks.v1 import webhooks_pb2

E = TypeVar("E", bound=StrEnum)


class _ProtoEnum(Protocol):
    def Value(self, name: str) -> Any: ...


class EnumTable(Generic[E]):
    """Both directions between the members of ``words`` and the numbers of ``proto_enum``."""

    def __init__(self, words: type[E], proto_enum: _ProtoEnum, prefix: str) -> None:
        self.words = words
        self.prefix = prefix
        self._to_pb: dict[E, int] = {m: int(proto_enum.Value(f"{prefix}{m.name}")) for m in words}
        self._from_pb: dict[int, E] = {n: m for m, n in self._to_pb.items()}

    def pb(self, word: E | str) -> Any:
        """The proto number of a member (or its string value); ValueError for an unknown word."""
        return self._to_pb[self.words(word)]

    def word(self, number: int) -> E:
        """The member of a proto number; ValueError for UNSPECIFIED or a number this release lacks."""
        try:
            return self._from_pb[number]
        except KeyError:
            raise ValueError(f"{self.prefix}{number}: not a known value") from None

    def get(self, number: int, default: str = "") -> str:
        """The word of a proto number, ``default`` for UNSPECIFIED or an unknown number."""
        member = self._from_pb.get(number)
        return default if member is None else member.value

    def names(self) -> dict[int, str]:
        """{number: word}, for templates and tables."""
        return {n: m.value for n, m in self._from_pb.items()}


AUTH_ENVIRONMENT = EnumTable(Environment, auth_pb2.Environment, "ENVIRONMENT_")
HOOKS_ENVIRONMENT = EnumTable(Environment, webhooks_pb2.Environment, "ENVIRONMENT_")
ACCOUNT_STATUS = EnumTable(AccountStatus, auth_pb2.AccountStatus, "ACCOUNT_STATUS_")
ACCOUNT_MODE = EnumTable(AccountMode, auth_pb2.AccountMode, "ACCOUNT_MODE_")
KEY_STATUS = EnumTable(KeyStatus, auth_pb2.KeyStatus, "KEY_STATUS_")
USER_ROLE = EnumTable(UserRole, identity_pb2.UserRole, "USER_ROLE_")
ENDPOINT_STATUS = EnumTable(EndpointStatus, webhooks_pb2.EndpointStatus, "ENDPOINT_STATUS_")
DELIVERY_STATUS = EnumTable(DeliveryStatus, webhooks_pb2.DeliveryStatus, "DELIVERY_STATUS_")
ATTEMPT_OUTCOME = EnumTable(AttemptOutcome, webhooks_pb2.AttemptOutcome, "ATTEMPT_OUTCOME_")
SIGNATURE_SCHEME = EnumTable(SignatureScheme, webhooks_pb2.SignatureScheme, "SIGNATURE_SCHEME_")
DELIVERY_ORDER = EnumTable(DeliveryOrder, webhooks_pb2.DeliveryOrder, "DELIVERY_ORDER_")
PAYLOAD_MODE = EnumTable(PayloadMode, webhooks_pb2.PayloadMode, "PAYLOAD_MODE_")
DESTINATION_TYPE = EnumTable(DestinationType, webhooks_pb2.DestinationType, "DESTINATION_TYPE_")

"""The per-RPC allow list of callers (svckit.peers.allowed), by table."""

from __future__ import annotations

from types import ModuleType

import pytest

from svckit.peers import ALLOWED, OPERATORS_ONLY, allowed, may_publish, role_of
from travel.auth.v1 import auth_pb2, identity_pb2
from travel.webhooks.v1 import webhooks_pb2

AUTH = "/travel.auth.v1.AuthService/"
HOOKS = "/travel.webhooks.v1.WebhookService/"
IDENTITY = "/travel.auth.v1.IdentityService/"
HEALTH = "/grpc.health.v1.Health/Check"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"

CASES = [
    # (caller identity, method, allowed?)
    ("edge", AUTH + "Authorize", True),
    ("edge", AUTH + "WatchKeyChanges", True),
    ("edge", AUTH + "ResolveTraveller", True),
    ("edge", AUTH + "DeleteTraveller", True),
    ("edge", AUTH + "ConsumeSearch", True),
    ("edge", AUTH + "GetUsage", True),
    ("edge", HOOKS + "RegisterEndpoint", True),
    ("edge", HOOKS + "RotateSigningSecret", True),
    ("edge", HOOKS + "StreamEvents", True),
    ("edge", AUTH + "CreateKey", False),
    ("edge", AUTH + "RevokeKey", False),
    # Secret scanning: by the SHA-256 of secrets the edge was given (a report, or the presented key).
    ("edge", AUTH + "RevokeLeakedKeys", True),
    ("edge", AUTH + "RevokeOwnKey", True),
    ("portal", AUTH + "RevokeLeakedKeys", False),
    ("edge", AUTH + "CreateAccount", False),
    ("edge", AUTH + "SetAccountStatus", False),
    ("edge", AUTH + "ListAuditEvents", False),
    ("edge", HOOKS + "PublishEvent", True),  # sandbox events only: may_publish
    # The sandbox clock: the edge's sandbox route and operators (webhookd refuses a live environment).
    ("edge", HOOKS + "AdvanceSandboxClock", True),
    ("svcctl", HOOKS + "AdvanceSandboxClock", True),
    ("portal", HOOKS + "AdvanceSandboxClock", True),
    ("authsvc", HOOKS + "AdvanceSandboxClock", False),
    ("webhookd", HOOKS + "AdvanceSandboxClock", False),
    ("product:hotels", HOOKS + "AdvanceSandboxClock", False),
    ("stranger", HOOKS + "AdvanceSandboxClock", False),
    ("svcctl", AUTH + "CreateKey", True),
    ("svcctl", AUTH + "SetAccountStatus", True),
    ("svcctl", HOOKS + "PublishEvent", True),
    ("svcctl", HOOKS + "RecoverEndpoint", True),
    ("portal", AUTH + "RotateKey", True),
    # The portal calls what its pages need, for its signed-in user (svckit.portal_calls): nothing that
    # creates accounts, sets their status, publishes events or watches keys.
    ("portal", AUTH + "CreateAccount", False),
    ("portal", AUTH + "SetAccountStatus", False),
    ("portal", AUTH + "WatchKeyChanges", False),
    ("portal", AUTH + "Authorize", False),
    ("portal", HOOKS + "PublishEvent", False),
    ("portal", HOOKS + "StreamEvents", False),
    ("portal", AUTH + "SomethingNew", False),
    ("webhookd", IDENTITY + "GetSession", True),
    ("webhookd", IDENTITY + "CreateInvite", False),
    ("portal", HOOKS + "ListAttempts", True),
    # Writing the audit trail in a portal user's name: the portal and svcctl only.
    ("portal", IDENTITY + "RecordAuditEvent", True),
    ("svcctl", IDENTITY + "RecordAuditEvent", True),
    ("edge", IDENTITY + "RecordAuditEvent", False),
    ("webhookd", IDENTITY + "RecordAuditEvent", False),
    ("authsvc", IDENTITY + "RecordAuditEvent", False),
    ("product:hotels", IDENTITY + "RecordAuditEvent", False),
    ("authsvc", HOOKS + "PublishEvent", True),
    # The request log: the edge records what it answered, only it (not even operators); operators read it.
    ("edge", AUTH + "RecordRequests", True),
    ("svcctl", AUTH + "RecordRequests", False),
    ("portal", AUTH + "RecordRequests", False),
    ("authsvc", AUTH + "RecordRequests", False),
    ("webhookd", AUTH + "RecordRequests", False),
    ("product:hotels", AUTH + "RecordRequests", False),
    ("stranger", AUTH + "RecordRequests", False),
    # Usage counts: the edge adds them and reads a partner's; operators read (svcctl usage), never add.
    ("edge", AUTH + "RecordUsageCounts", True),
    ("edge", AUTH + "QueryUsageCounts", True),
    ("svcctl", AUTH + "RecordUsageCounts", False),
    ("svcctl", AUTH + "QueryUsageCounts", True),
    ("portal", AUTH + "RecordUsageCounts", False),
    ("product:hotels", AUTH + "RecordUsageCounts", False),
    ("portal", AUTH + "ListRequests", True),
    ("svcctl", AUTH + "ListRequests", True),
    ("edge", AUTH + "ListRequests", False),
    ("webhookd", AUTH + "ListRequests", False),
    ("product:hotels", AUTH + "ListRequests", False),
    ("authsvc", HOOKS + "RegisterEndpoint", False),
    ("authsvc", AUTH + "CreateKey", False),
    ("webhookd", AUTH + "GetAccount", True),
    ("webhookd", AUTH + "GetAlertRecipients", True),
    ("edge", AUTH + "GetAlertRecipients", False),
    # GET /v1/ledger reads the partner's credit; the edge never holds or changes it.
    ("edge", AUTH + "GetCreditLedger", True),
    ("edge", AUTH + "ListLedgerEntries", True),
    ("edge", AUTH + "PlaceCreditHold", False),
    ("edge", AUTH + "SetCreditLimit", False),
    ("edge", AUTH + "AddCredit", False),
    ("product:hotels", AUTH + "SetCreditLimit", False),
    ("product:hotels", AUTH + "AddCredit", False),
    ("product:hotels", AUTH + "SetCreditWarningLevel", False),
    ("svcctl", AUTH + "SetCreditLimit", True),
    ("svcctl", AUTH + "AddCredit", True),
    ("portal", AUTH + "SetCreditLimit", False),
    ("portal", AUTH + "AddCredit", False),
    ("product:hotels", AUTH + "GetAlertRecipients", False),
    ("portal", AUTH + "GetAlertRecipients", True),
    ("svcctl", AUTH + "GetAlertRecipients", True),
    ("webhookd", AUTH + "ListKeys", False),
    ("webhookd", HOOKS + "PublishEvent", False),
    ("product:hotels", HOOKS + "PublishEvent", True),
    ("product:hotels", AUTH + "ConsumeSearch", True),
    ("product:hotels", AUTH + "Authorize", True),
    ("product:hotels", AUTH + "GetAccount", True),
    ("product:hotels", AUTH + "CreateKey", False),
    ("product:hotels", AUTH + "ListKeys", False),
    ("product:hotels", HOOKS + "ListEndpoints", False),
    ("product:", HOOKS + "PublishEvent", False),
    ("products", HOOKS + "PublishEvent", False),
    ("stranger", AUTH + "GetAccount", False),
    # Billing sets an account read-only after an unpaid settlement charge and lifts it once paid.
    ("billing", AUTH + "SetAccountStatus", True),
    ("billing", AUTH + "GetAccount", True),
    ("billing", AUTH + "CreateKey", False),
    ("billing", AUTH + "RevokeKey", False),
    ("billing", AUTH + "ListKeys", False),
    ("billing", AUTH + "UpdateAccount", False),
    ("billing", AUTH + "CreateAccount", False),
    ("billing", AUTH + "ListAuditEvents", False),
    ("billing", AUTH + "Authorize", False),
    ("billing", AUTH + "RecordRequests", False),
    ("billing", IDENTITY + "RecordAuditEvent", False),
    ("billing", HOOKS + "PublishEvent", True),
    ("billing", HOOKS + "RegisterEndpoint", False),
    ("product:billing", AUTH + "SetAccountStatus", False),  # a product named billing is still a product
    ("billingx", AUTH + "SetAccountStatus", False),
    ("stranger", HEALTH, True),
    ("edge", HEALTH, True),
    ("edge", REFLECTION, True),
    ("", HEALTH, False),
    ("", AUTH + "Authorize", False),
    # A method no table names (an RPC added later) is for operators only until someone lists it.
    ("edge", AUTH + "SomethingNew", False),
    ("svcctl", AUTH + "SomethingNew", True),
    # Leading slash or not, the same answer; a look-alike service is not the real one.
    ("edge", AUTH.lstrip("/") + "Authorize", True),
    ("edge", "/evil.AuthService/Authorize", False),
]


@pytest.mark.parametrize(("identity", "method", "expected"), CASES)
def test_allowed(identity: str, method: str, expected: bool) -> None:
    assert allowed(identity, method) is expected


@pytest.mark.parametrize(
    ("identity", "role"),
    [("product:esim", "product"), ("product:", "product:"), ("edge", "edge"), ("xproduct:a", "xproduct:a")],
)
def test_role_of(identity: str, role: str) -> None:
    assert role_of(identity) == role


@pytest.mark.parametrize(
    ("identity", "env", "expected"),
    [
        ("edge", "sandbox", True),
        ("edge", "live", False),  # the edge publishes sandbox events only
        ("authsvc", "live", True),
        ("product:hotels", "live", False),  # not a kind of its own (tests/unit/test_publish_decision.py)
        ("svcctl", "live", False),
        ("", "live", True),  # a plaintext (--insecure-dev) server has no identity to hold against anyone
    ],
)
def test_may_publish(identity: str, env: str, expected: bool) -> None:
    """The allow list's PublishEvent entries are refined by the catalog's publishers (svckit.publishers)."""
    assert may_publish(identity, "search_quota.threshold", env, {}) is expected


def test_every_listed_method_exists() -> None:
    """A renamed or misspelt RPC in the table would silently refuse its caller."""
    real = {
        f"{service.full_name}/{method.name}"
        for descriptor in (auth_pb2.DESCRIPTOR, identity_pb2.DESCRIPTOR, webhooks_pb2.DESCRIPTOR)
        for service in descriptor.services_by_name.values()
        for method in service.methods
    }
    for identity, methods in ALLOWED.items():
        assert methods <= real, (identity, sorted(methods - real))


def test_operators_only_methods_are_listed_for_no_service() -> None:
    real = {path.lstrip("/") for path in _methods(identity_pb2.DESCRIPTOR).values()}
    assert OPERATORS_ONLY <= real
    for identity, methods in ALLOWED.items():
        # The portal writes the audit trail only for the user whose session the call carries.
        assert identity == "portal" or not methods & OPERATORS_ONLY, identity


def _methods(descriptor: object) -> dict[str, str]:
    """RPC name -> full method path, for every service in a proto file's descriptor."""
    return {
        method.name: f"/{service.full_name}/{method.name}"
        for service in descriptor.services_by_name.values()  # type: ignore[attr-defined]
        for method in service.methods
    }


# What a product service may call (docs/product-services.md): nothing else of any service.
PRODUCT_MAY_CALL = {
    AUTH + "Authenticate",
    AUTH + "Authorize",
    AUTH + "ResolveTraveller",
    AUTH + "GetAccount",
    AUTH + "GetUsage",
    AUTH + "ConsumeSearch",
    # Mode A credit: hold, capture, release, read the balance.
    AUTH + "PlaceCreditHold",
    AUTH + "CaptureCreditHold",
    AUTH + "ReleaseCreditHold",
    AUTH + "GetCreditLedger",
    HOOKS + "PublishEvent",
}
EVERY_RPC = sorted(
    path for module in (auth_pb2, identity_pb2, webhooks_pb2) for path in _methods(module.DESCRIPTOR).values()
)


# What the billing service may call (docs/authentication.md "Read-only accounts"): nothing else.
BILLING_MAY_CALL = {AUTH + "SetAccountStatus", AUTH + "GetAccount", HOOKS + "PublishEvent"}


@pytest.mark.parametrize("method", EVERY_RPC)
def test_billing_role_by_rpc(method: str) -> None:
    """Role x RPC, every RPC of every proto service: billing is allowed exactly its list."""
    assert allowed("billing", method) is (method in BILLING_MAY_CALL)


@pytest.mark.parametrize("identity", ["product:hotels", "product:flights", "product:esim"])
@pytest.mark.parametrize("method", EVERY_RPC)
def test_product_role_by_rpc(identity: str, method: str) -> None:
    """Role x RPC, every RPC of every proto service: a product is allowed exactly its list."""
    assert allowed(identity, method) is (method in PRODUCT_MAY_CALL)


def test_product_list_names_real_rpcs_and_administers_nothing() -> None:
    assert PRODUCT_MAY_CALL <= set(EVERY_RPC)
    administers = ("Create", "Update", "Set", "Rotate", "Revoke", "List", "Delete", "Watch", "Record")
    names = {path.rsplit("/", 1)[1] for path in PRODUCT_MAY_CALL}
    assert not {n for n in names if n.startswith(administers)}


@pytest.mark.parametrize(
    ("package", "identity", "peers"),
    [
        ("edge", "edge", (auth_pb2, identity_pb2, webhooks_pb2)),
        ("authsvc", "authsvc", (webhooks_pb2,)),
        ("webhookd", "webhookd", (auth_pb2, identity_pb2)),
        ("portal", "portal", (auth_pb2, identity_pb2, webhooks_pb2)),
    ],
)
def test_every_rpc_a_service_calls_is_allowed_for_it(
    package: str, identity: str, peers: tuple[ModuleType, ...]
) -> None:
    """Over mTLS a call missing from the table is refused in production: a service's code naming a peer's
    RPC (``stub.Name(``, or building its ``NameRequest(`` for a call helper) must be listed."""
    import pathlib
    import re

    methods = {name: path for module in peers for name, path in _methods(module.DESCRIPTOR).items()}
    root = pathlib.Path(__file__).resolve().parents[2] / package
    source = "\n".join(p.read_text() for p in root.rglob("*.py"))
    called = {name for name in methods if re.search(rf"\.{name}\(|\b{name}Request\(", source)}
    assert called, "the scan found no call at all"
    refused = sorted(name for name in called if not allowed(identity, methods[name]))
    assert refused == [], f"{identity} calls {refused}: add them to svckit.peers.ALLOWED"

"""``AuthClient``: authsvc's AuthService and IdentityService on one channel.

async with AuthClient("127.0.0.1:50051", tls) as auth:
    key = (await auth.get_key(pb.GetKeyRequest(key_id="key_..."))).key
"""

from __future__ import annotations

from collections.abc import Iterable

from svckit.clients.channels import service_config, target
from svckit.clients.rpc import Client, Stream, Unary
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import identity_pb2 as ipb

AUTH_SERVICE = "travel.auth.v1.AuthService"
# Calls that may safely run twice (they read, or write the same thing again): every read a product
# service makes among them (docs/product-services.md). ConsumeSearch counts a search: a retry after a lost
# answer could count it twice.
RETRIED_METHODS = (
    "Authorize",
    "Authenticate",
    "ResolveTraveller",
    "DeleteTraveller",
    "GetAccount",
    "GetUsage",
    # Holds are idempotent by booking reference (a retry is the same hold), and so are their moves.
    "PlaceCreditHold",
    "CaptureCreditHold",
    "ReleaseCreditHold",
    "GetCreditLedger",
    "ListLedgerEntries",
    # A usage batch applied again is skipped by its batch id; a query only reads.
    "RecordUsageCounts",
    "QueryUsageCounts",
)


def auth_target(addresses: str | Iterable[str]) -> str:
    """The gRPC target of ``--authsvc`` (one target, or several IP:PORT; svckit.clients.channels)."""
    return target(addresses, "--authsvc")


def auth_service_config() -> str:
    """authsvc's service config: round robin over every address, retries for RETRIED_METHODS."""
    return service_config(AuthClient.RETRIED)


class AuthClient(Client):
    SERVER = "authsvc"
    RETRIED = {AUTH_SERVICE: RETRIED_METHODS}

    # -- travel.auth.v1.AuthService ----------------------------------------------------------------
    authenticate = Unary(pb.AuthenticateRequest, pb.AuthenticateResponse)
    authorize = Unary(pb.AuthorizeRequest, pb.AuthorizeResponse)
    create_account = Unary(pb.CreateAccountRequest, pb.CreateAccountResponse)
    get_account = Unary(pb.GetAccountRequest, pb.GetAccountResponse)
    set_account_status = Unary(pb.SetAccountStatusRequest, pb.SetAccountStatusResponse)
    set_certification_required = Unary(
        pb.SetCertificationRequiredRequest, pb.SetCertificationRequiredResponse
    )
    override_certification = Unary(pb.OverrideCertificationRequest, pb.OverrideCertificationResponse)
    start_certification_run = Unary(pb.StartCertificationRunRequest, pb.StartCertificationRunResponse)
    get_certification_run = Unary(pb.GetCertificationRunRequest, pb.GetCertificationRunResponse)
    claim_certification_fault = Unary(pb.ClaimCertificationFaultRequest, pb.ClaimCertificationFaultResponse)
    record_certification_requests = Unary(
        pb.RecordCertificationRequestsRequest, pb.RecordCertificationRequestsResponse
    )
    record_certification_probes = Unary(
        pb.RecordCertificationProbesRequest, pb.RecordCertificationProbesResponse
    )
    finish_certification_run = Unary(pb.FinishCertificationRunRequest, pb.FinishCertificationRunResponse)
    list_certification_keys = Unary(pb.ListCertificationKeysRequest, pb.ListCertificationKeysResponse)
    update_account = Unary(pb.UpdateAccountRequest, pb.UpdateAccountResponse)
    get_alert_recipients = Unary(pb.GetAlertRecipientsRequest, pb.GetAlertRecipientsResponse)
    create_key = Unary(pb.CreateKeyRequest, pb.CreateKeyResponse)
    get_key = Unary(pb.GetKeyRequest, pb.GetKeyResponse)
    revoke_leaked_keys = Unary(pb.RevokeLeakedKeysRequest, pb.RevokeLeakedKeysResponse)
    revoke_own_key = Unary(pb.RevokeOwnKeyRequest, pb.RevokeOwnKeyResponse)
    list_keys = Unary(pb.ListKeysRequest, pb.ListKeysResponse)
    update_key = Unary(pb.UpdateKeyRequest, pb.UpdateKeyResponse)
    rotate_key = Unary(pb.RotateKeyRequest, pb.RotateKeyResponse)
    revoke_key = Unary(pb.RevokeKeyRequest, pb.RevokeKeyResponse)
    list_audit_events = Unary(pb.ListAuditEventsRequest, pb.ListAuditEventsResponse)
    watch_key_changes = Stream(pb.WatchKeyChangesRequest, pb.WatchKeyChangesResponse)
    resolve_traveller = Unary(pb.ResolveTravellerRequest, pb.ResolveTravellerResponse)
    delete_traveller = Unary(pb.DeleteTravellerRequest, pb.DeleteTravellerResponse)
    consume_search = Unary(pb.ConsumeSearchRequest, pb.ConsumeSearchResponse)
    get_usage = Unary(pb.GetUsageRequest, pb.GetUsageResponse)
    record_requests = Unary(pb.RecordRequestsRequest, pb.RecordRequestsResponse)
    list_requests = Unary(pb.ListRequestsRequest, pb.ListRequestsResponse)
    # Usage counts (exact rollups of answered requests; svckit.usagecounts has the latency buckets).
    record_usage_counts = Unary(pb.RecordUsageCountsRequest, pb.RecordUsageCountsResponse)
    query_usage_counts = Unary(pb.QueryUsageCountsRequest, pb.QueryUsageCountsResponse)
    # Mode A credit (docs/product-services.md "Credit (mode A)"): a refused hold is CreditExhausted.
    place_credit_hold = Unary(pb.PlaceCreditHoldRequest, pb.PlaceCreditHoldResponse)
    capture_credit_hold = Unary(pb.CaptureCreditHoldRequest, pb.CaptureCreditHoldResponse)
    release_credit_hold = Unary(pb.ReleaseCreditHoldRequest, pb.ReleaseCreditHoldResponse)
    get_credit_ledger = Unary(pb.GetCreditLedgerRequest, pb.GetCreditLedgerResponse)
    list_ledger_entries = Unary(pb.ListLedgerEntriesRequest, pb.ListLedgerEntriesResponse)
    set_credit_limit = Unary(pb.SetCreditLimitRequest, pb.SetCreditLimitResponse)
    add_credit = Unary(pb.AddCreditRequest, pb.AddCreditResponse)
    set_credit_warning_level = Unary(pb.SetCreditWarningLevelRequest, pb.SetCreditWarningLevelResponse)

    # -- travel.auth.v1.IdentityService ------------------------------------------------------------
    create_invite = Unary(ipb.CreateInviteRequest, ipb.CreateInviteResponse)
    accept_invite = Unary(ipb.AcceptInviteRequest, ipb.AcceptInviteResponse)
    sign_in = Unary(ipb.SignInRequest, ipb.SignInResponse)
    get_session = Unary(ipb.GetSessionRequest, ipb.GetSessionResponse)
    sign_out = Unary(ipb.SignOutRequest, ipb.SignOutResponse)
    list_users = Unary(ipb.ListUsersRequest, ipb.ListUsersResponse)
    set_user_role = Unary(ipb.SetUserRoleRequest, ipb.SetUserRoleResponse)
    remove_user = Unary(ipb.RemoveUserRequest, ipb.RemoveUserResponse)
    change_password = Unary(ipb.ChangePasswordRequest, ipb.ChangePasswordResponse)
    begin_totp_enrollment = Unary(ipb.BeginTotpEnrollmentRequest, ipb.BeginTotpEnrollmentResponse)
    confirm_totp_enrollment = Unary(ipb.ConfirmTotpEnrollmentRequest, ipb.ConfirmTotpEnrollmentResponse)
    disable_totp = Unary(ipb.DisableTotpRequest, ipb.DisableTotpResponse)
    list_sessions = Unary(ipb.ListSessionsRequest, ipb.ListSessionsResponse)
    revoke_session = Unary(ipb.RevokeSessionRequest, ipb.RevokeSessionResponse)
    set_totp_requirement = Unary(ipb.SetTotpRequirementRequest, ipb.SetTotpRequirementResponse)
    record_audit_event = Unary(ipb.RecordAuditEventRequest, ipb.RecordAuditEventResponse)

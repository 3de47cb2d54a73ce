"""The travel.auth.v1.AuthService servicer: validates input, calls the repository, publishes changes.

Assembled from one part per group of RPCs, each on ``ServicerBase`` (state and shared helpers):
Authenticate and Authorize (``_service_authorize``), keys, audit and key changes (``_service_keys``),
accounts, travellers and the search allowance (``_service_accounts``), the request log
(``_service_requests``), mode A credit (``_service_ledger``), keys found in public
(``_service_leaks``), usage counts (``_service_usage_counts``).
"""

from __future__ import annotations

from authsvc._service_accounts import AccountRpcs
from authsvc._service_authorize import AuthenticationRpcs
from authsvc._service_certify import CertificationRpcs, CertificationRunRpcs
from authsvc._service_keys import KeyRpcs
from authsvc._service_leaks import LeakRpcs
from authsvc._service_ledger import LedgerRpcs
from authsvc._service_requests import RequestLogRpcs
from authsvc._service_usage_counts import UsageCountRpcs

__all__ = ["AuthServicer"]


class AuthServicer(
    AuthenticationRpcs,
    KeyRpcs,
    LeakRpcs,
    AccountRpcs,
    RequestLogRpcs,
    LedgerRpcs,
    UsageCountRpcs,
    CertificationRpcs,
    CertificationRunRpcs,
):
    """travel.auth.v1.AuthService."""

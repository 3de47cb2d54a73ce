"""authsvc's exceptions. Each carries a public error type of decisions.md; svckit maps it to a status.

    ServiceError                  (svckit)
    └── AuthError                 root of every error authsvc answers with on purpose
        ├── InvalidRequest        invalid_request        bad input; the message names the field
        ├── MissingApiKey         missing_api_key        no key presented
        ├── InvalidApiKey         invalid_api_key        malformed, unknown, revoked or expired key
        ├── NotFound              not_found              unknown account, key or traveller
        ├── Conflict              conflict               operation not possible in the current state
        ├── InvalidCustomerRef    invalid_customer_ref   partner traveller reference refused
        ├── SearchQuotaExhausted  search_quota_exhausted daily search allowance used up
        ├── CreditExhausted       credit_exhausted       a mode A credit hold does not fit the credit
        ├── InvalidCredentials    invalid_credentials    portal sign-in refused (never says which part)
        ├── SecondFactorRequired  second_factor_required portal sign-in needs the TOTP code
        ├── SessionExpired        session_expired        portal session unknown, ended or timed out
        ├── Forbidden             forbidden              the portal user's role does not allow it
        ├── CertificationRequired certification_required a live key before the account is certified
        ├── Throttled             rate_limited           too many failed sign-ins
        └── Unavailable           service_unavailable    a service it needs (webhookd) did not answer

Messages never contain a secret.
"""

from __future__ import annotations

from svckit.errors import InvalidInput, ServiceError


class AuthError(ServiceError):
    type = "internal_error"
    domain = "auth.travel"


class InvalidRequest(AuthError, InvalidInput):
    type = "invalid_request"


class MissingApiKey(AuthError):
    type = "missing_api_key"


class InvalidApiKey(AuthError):
    type = "invalid_api_key"


class NotFound(AuthError):
    type = "not_found"


class Conflict(AuthError):
    type = "conflict"


class CertificationRequired(AuthError):
    type = "certification_required"


class InvalidCustomerRef(AuthError):
    type = "invalid_customer_ref"


class SearchQuotaExhausted(AuthError):
    type = "search_quota_exhausted"


class CreditExhausted(AuthError):
    type = "credit_exhausted"


class InvalidCredentials(AuthError):
    type = "invalid_credentials"


class SecondFactorRequired(AuthError):
    type = "second_factor_required"


class SessionExpired(AuthError):
    type = "session_expired"


class Forbidden(AuthError):
    type = "forbidden"


class Throttled(AuthError):
    type = "rate_limited"


class Unavailable(AuthError):
    type = "service_unavailable"

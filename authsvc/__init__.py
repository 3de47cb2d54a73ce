"""authsvc: the partner key authority (travel.auth.v1) over gRPC."""

from __future__ import annotations

from authsvc._decision import AccessRequest, Credential, Decision, authorize
from authsvc._errors import (
    AuthError,
    Conflict,
    InvalidApiKey,
    InvalidCustomerRef,
    InvalidRequest,
    MissingApiKey,
    NotFound,
    SearchQuotaExhausted,
)
from authsvc._keys import environment_of, generate_secret, hash_secret, hint
from authsvc._model import Account, ApiKey, KeyGrant
from authsvc._server import AuthServer, run_server, serve
from svckit.allowlist import source_allowed, validate_allowlist
from svckit.scopes import ALL_SCOPES, validate_scopes

__all__ = [
    "ALL_SCOPES",
    "AccessRequest",
    "Account",
    "ApiKey",
    "AuthError",
    "AuthServer",
    "Conflict",
    "Credential",
    "Decision",
    "InvalidApiKey",
    "InvalidCustomerRef",
    "InvalidRequest",
    "KeyGrant",
    "MissingApiKey",
    "NotFound",
    "SearchQuotaExhausted",
    "authorize",
    "environment_of",
    "generate_secret",
    "hash_secret",
    "hint",
    "run_server",
    "serve",
    "source_allowed",
    "validate_allowlist",
    "validate_scopes",
]

"""The OpenAPI operations of the secret-scanning routes (edge.blueprints.leaks): not called with an API
key but by GitHub (signed: ``githubSignature``) or GitLab (an issued token: ``gitlabToken``); live host only
(404 on the sandbox host)."""

from __future__ import annotations

from typing import Any

from edge.secretscanning import GITLAB_PATH, MAX_TOKENS, ScanningConfig
from svckit.resources import ALL_SCOPES

SECURITY_SCHEMES = {
    "githubSignature": {
        "type": "apiKey",
        "in": "header",
        "name": "GITHUB-PUBLIC-KEY-SIGNATURE",
        "description": "GitHub's ECDSA P-256 SHA-256 signature of the raw body (base64 DER), with "
        "GITHUB-PUBLIC-KEY-IDENTIFIER naming the key of GitHub's published list",
    },
    "gitlabToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "the revocation token the operator issued to GitLab",
    },
}
_TEXT = {"type": "string", "maxLength": 2048}
_REPORTED = {
    "type": "array",
    "maxItems": MAX_TOKENS,
    "items": {
        "type": "object",
        "required": ["token"],
        "properties": {
            "token": {"type": "string", "minLength": 1, "maxLength": 1024},
            "type": _TEXT,
            "url": _TEXT,
            "source": _TEXT,
        },
    },
}
_GITLAB_REPORTED = {
    **_REPORTED,
    "items": {
        "type": "object",
        "required": ["token"],
        "properties": {
            "token": {"type": "string", "minLength": 1, "maxLength": 1024},
            "type": _TEXT,
            "location": _TEXT,
        },
    },
}
_FEEDBACK = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["token_hash", "token_type", "label"],
        "properties": {
            "token_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "token_type": {"type": "string"},
            "label": {"enum": ["true_positive", "false_positive"]},
        },
    },
}
_TYPES = {
    "type": "object",
    "required": ["types"],
    "properties": {
        "types": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "name", "description", "regex"],
                "properties": {k: {"type": "string"} for k in ("type", "name", "description", "regex")},
            },
        }
    },
}
_REFUSALS = (400, 401, 404, 413, 421, 429, 503)


def _responses(ok: int, schema: dict[str, Any] | None) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": "OK" if ok == 200 else "Revoked (no content)"}
    if schema is not None:
        answer["content"] = {"application/json": {"schema": schema}}
    return {
        str(ok): answer,
        **{str(s): {"$ref": f"#/components/responses/Error{s}"} for s in _REFUSALS},
        "default": {"$ref": "#/components/responses/Error"},
    }


def leak_paths(config: ScanningConfig) -> dict[str, Any]:
    return {
        config.github_path: {
            "post": {
                "operationId": "reportLeakedTokensGitHub",
                "summary": "GitHub secret scanning: tokens found in public (our keys are revoked at once)",
                "description": "Signed by GitHub; a missing, unknown or wrong signature is 401 "
                "invalid_credentials and changes nothing. The answer labels each token by its SHA-256: "
                "true_positive for a key of ours (revoked now, or already dead), false_positive for "
                f"anything else. At most {MAX_TOKENS} tokens (413 beyond). Live host only.",
                "security": [{"githubSignature": []}],
                "parameters": [
                    {
                        "name": "GITHUB-PUBLIC-KEY-IDENTIFIER",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string", "maxLength": 2048},
                    }
                ],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _REPORTED}}},
                "responses": _responses(200, _FEEDBACK),
            }
        },
        f"{GITLAB_PATH}/revocable_token_types": {
            "get": {
                "operationId": "gitlabRevocableTokenTypes",
                "summary": "GitLab token revocation: the token types to look for, with their pattern",
                "description": "401 unless the operator configured a GitLab token. Live host only.",
                "security": [{"gitlabToken": []}],
                "responses": _responses(200, _TYPES),
            }
        },
        f"{GITLAB_PATH}/revoke_tokens": {
            "post": {
                "operationId": "gitlabRevokeTokens",
                "summary": "GitLab token revocation: tokens found in public (our keys are revoked at once)",
                "description": f"At most {MAX_TOKENS} tokens (413 beyond). 401 unless the operator "
                "configured a GitLab token. Live host only.",
                "security": [{"gitlabToken": []}],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _GITLAB_REPORTED}},
                },
                "responses": _responses(204, None),
            }
        },
    }


KEY_SELF_SCHEMA = {
    "type": "object",
    "required": ["object", "id", "environment", "livemode", "status", "scopes", "expiresAt"],
    "properties": {
        "object": {"const": "api_key"},
        "id": {"type": "string", "pattern": "^key_"},
        "environment": {"enum": ["live", "sandbox"]},
        "livemode": {"type": "boolean"},
        "status": {"enum": ["active", "expiring", "revoked"]},
        "scopes": {"type": "array", "items": {"type": "string", "enum": list(ALL_SCOPES)}},
        "expiresAt": {"type": ["string", "null"], "format": "date-time"},
        "revokedAt": {"type": ["string", "null"], "format": "date-time"},
    },
}
KEY_SELF_TEXT = (
    "Any valid key, whatever its scopes: a key may always inspect and revoke itself. No account or "
    "personal data is answered."
)

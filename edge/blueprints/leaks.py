"""Secret scanning: keys found in public die in seconds (docs/authentication.md "Leaked keys").

- ``POST /v1/secret-scanning/github`` (the path: ``--secret-scanning-github-path``), live host only, no API
  key: GitHub's secret scanning partner program reports a batch of tokens, signed by GitHub
  (edge.githubkeys); a missing, unknown or wrong signature is 401 and touches nothing. The answer is
  GitHub's feedback array (``true_positive`` for each key of ours, ``false_positive`` for the rest).
- ``GET /v1/secret-scanning/gitlab/revocable_token_types`` and ``POST
  /v1/secret-scanning/gitlab/revoke_tokens``: GitLab's token revocation API, authenticated by a token an
  operator issued (``--secret-scanning-gitlab-token-file``: its SHA-256 is compared in constant time;
  without one, every request is 401).

Both go through ``_revoke``: one RevokeLeakedKeys call per batch with the SHA-256 of each well-formed token
(edge.secretscanning); authsvc revokes, audits and queues apikey.revoked and apikey.leaked, and webhookd
e-mails the account's people. A batch sent again changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError
from edge.githubkeys import IDENTIFIER_HEADER, SIGNATURE_HEADER, KeyList, signature_valid
from edge.responses import EdgeResponse, json_response
from edge.secretscanning import (
    GITHUB_REPORTER,
    GITLAB_PATH,
    GITLAB_REPORTER,
    MAX_FIELD_CHARS,
    TOKEN_TYPE,
    Reported,
    ScanningConfig,
    candidates,
    github_feedback,
    parse_batch,
)
from svckit.apikeys import key_pattern
from travel.auth.v1 import auth_pb2

log = logging.getLogger(__name__)

ACTOR = "secret-scanning"
NOT_SIGNED = (
    "the request must be signed by GitHub (GITHUB-PUBLIC-KEY-IDENTIFIER, GITHUB-PUBLIC-KEY-SIGNATURE)"
)
BAD_SIGNATURE = "the request's signature does not verify with the GitHub key it names"
BAD_TOKEN = "the request must carry the revocation token this service issued: 'Authorization: Bearer <token>'"


def _live_only(request: EdgeRequest) -> None:
    """These routes exist on the live host only (the scanners are told one URL); 421 on an unknown host."""
    if request.app.ctx.gate.hosts.environment(request.headers.get("host")) is not Environment.LIVE:
        raise EdgeError(f"no route {request.method} {request.path} on the sandbox host", type="not_found")


async def _revoke(request: EdgeRequest, reported: list[Reported], reporter: str) -> set[str]:
    """The SHA-256 hashes of the reported tokens that are keys of ours (each revoked, if it still worked)."""
    asked = candidates(reported)
    if not asked:
        return set()
    answer = await request.app.ctx.auth.revoke_leaked_keys(
        auth_pb2.RevokeLeakedKeysRequest(
            tokens=[auth_pb2.LeakedToken(token_hash=r.token_hash, url=r.url, source=r.source) for r in asked],
            reporter=reporter,
            actor=auth_pb2.Actor(user=ACTOR, source_address=request.app.ctx.gate.source(request)),
        )
    )
    ours = {k.token_hash for k in answer.keys}
    authorizer = request.app.ctx.authorizer
    for k in answer.keys:
        if k.revoked_now:  # this edge forgets it now; the others when authsvc's watch tells them
            authorizer.apply_change(auth_pb2.KEY_CHANGE_KIND_REVOKED, k.key_id, k.account_id)
    log.info(
        "leak report",
        extra={
            "reporter": reporter,
            "tokens": len(reported),
            "ours": len(ours),
            "revoked_now": sum(k.revoked_now for k in answer.keys),
        },
    )
    return ours


def blueprint(config: ScanningConfig) -> Blueprint:
    """The routes, at the configured GitHub path, with their own copy of GitHub's key list."""
    bp = Blueprint("secret_scanning")
    github_keys = KeyList(config.github_keys)
    gitlab_digest = config.gitlab_token_sha256.strip().lower()

    async def github_report(request: EdgeRequest) -> HTTPResponse:
        """A batch of tokens GitHub found in public, signed by GitHub."""
        identifier = request.headers.get(IDENTIFIER_HEADER, "")
        signature = request.headers.get(SIGNATURE_HEADER, "")
        if not identifier or not signature or len(identifier) > MAX_FIELD_CHARS:
            raise EdgeError(NOT_SIGNED, type="invalid_credentials")
        key = await github_keys.key(identifier)
        if key is None or not signature_valid(request.body, signature, key):
            raise EdgeError(BAD_SIGNATURE, type="invalid_credentials")
        _live_only(request)  # after the signature: whoever is not GitHub learns nothing, 401 everywhere
        reported = parse_batch(request.body)
        ours = await _revoke(request, reported, GITHUB_REPORTER)
        return json_response(github_feedback(reported, ours))

    def gitlab_caller(request: EdgeRequest) -> None:
        """401 unless the request carries the token issued to GitLab (none is, without one configured)."""
        value = request.headers.get("authorization", "")
        scheme, _, rest = value.strip().partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else value.strip()
        digest = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
        if not gitlab_digest or not token or not hmac.compare_digest(digest.encode(), gitlab_digest.encode()):
            raise EdgeError(BAD_TOKEN, type="invalid_credentials")
        _live_only(request)

    async def gitlab_types(request: EdgeRequest) -> HTTPResponse:
        """The token types GitLab may send for revocation, with the pattern that finds them."""
        gitlab_caller(request)
        return json_response({"types": revocable_types()})

    async def gitlab_revoke(request: EdgeRequest) -> HTTPResponse:
        """Tokens GitLab found in public, for revocation."""
        gitlab_caller(request)
        reported = parse_batch(request.body, url_field="location")
        await _revoke(request, reported, GITLAB_REPORTER)
        return EdgeResponse(b"", status=204)

    bp.add_route(github_report, config.github_path, methods=["POST"], name="github_report")
    bp.add_route(gitlab_types, f"{GITLAB_PATH}/revocable_token_types", methods=["GET"], name="gitlab_types")
    bp.add_route(gitlab_revoke, f"{GITLAB_PATH}/revoke_tokens", methods=["POST"], name="gitlab_revoke")
    return bp


def revocable_types() -> list[dict[str, str]]:
    return [
        {
            "type": TOKEN_TYPE,
            "name": "svc API key",
            "description": "An API key of the travel API (live or test); revoked at once when reported.",
            "regex": key_pattern(),
        }
    ]

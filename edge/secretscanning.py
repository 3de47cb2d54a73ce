"""Leak reports: what a secret scanner (GitHub's partner program, GitLab's token revocation) sends, what
each reported token is, and the answer -- the pure parts of ``edge.blueprints.leaks``.

Why this shape: a report is a batch of up to ``MAX_TOKENS`` strings found in public. The format and the
checksum of a key (svckit.apikeys) tell a real-looking key from anything else with no database read: those
that fail are ``false_positive`` at once. The well-formed ones go to authsvc in one RevokeLeakedKeys call
per batch, by SHA-256 (the stored form of a key; the secret never leaves the edge), and authsvc answers
which were ours: those are ``true_positive`` (revoked now, or dead already), the rest ``false_positive``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge.exceptions import EdgeError
from edge.githubkeys import GITHUB_KEYS_URL
from svckit.apikeys import environment_of

MAX_TOKENS = 1000
MAX_TOKEN_CHARS = 1024
MAX_FIELD_CHARS = 2048
GITHUB_PATH = "/v1/secret-scanning/github"
GITLAB_PATH = "/v1/secret-scanning/gitlab"
GITHUB_REPORTER = "GitHub secret scanning"
GITLAB_REPORTER = "GitLab token revocation"
# The type name registered with the scanners, echoed in GitHub's feedback when a report names none.
TOKEN_TYPE = "svc_api_key"


@dataclass(frozen=True)
class ScanningConfig:
    """``--secret-scanning-*`` flags (edge.__main__)."""

    github_path: str = GITHUB_PATH
    # GitHub's key list: its URL (default), another URL, or a file holding the same JSON.
    github_keys: str = GITHUB_KEYS_URL
    # Hex SHA-256 of the token GitLab sends; empty: every GitLab request is refused (401).
    gitlab_token_sha256: str = ""


def gitlab_digest(path: str) -> str:
    """The hex SHA-256 held by ``--secret-scanning-gitlab-token-file`` ("" without one); else ValueError."""
    if not path:
        return ""
    text = Path(path).read_text(encoding="ascii").strip().lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"{path}: must hold the hex SHA-256 (64 hex digits) of GitLab's token")
    return text


@dataclass(frozen=True, slots=True)
class Reported:
    token: str
    type: str = ""
    url: str = ""
    source: str = ""

    @property
    def token_hash(self) -> str:
        return hashlib.sha256(self.token.encode("utf-8")).hexdigest()

    @property
    def well_formed(self) -> bool:
        """Prefix, length, alphabet and checksum of one of our keys (svckit.apikeys)."""
        return environment_of(self.token) is not None


def _field(entry: dict[str, Any], name: str, index: int, limit: int, required: bool = False) -> str:
    value = entry.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value) or len(value) > limit:
        raise EdgeError(
            f"[{index}].{name} must be a string of 1 to {limit} characters"
            if required
            else f"[{index}].{name} must be a string of at most {limit} characters",
            type="invalid_request",
        )
    return value


def parse_batch(body: bytes, token_field: str = "token", url_field: str = "url") -> list[Reported]:
    """A JSON array of ``{token, type, url, source}`` objects (GitHub's; GitLab's names the URL
    ``location``): 400 invalid_request for anything else, 413 payload_too_large past MAX_TOKENS."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise EdgeError("the body must be a JSON array of reported tokens", type="invalid_request") from None
    if not isinstance(parsed, list):
        raise EdgeError("the body must be a JSON array of reported tokens", type="invalid_request")
    if len(parsed) > MAX_TOKENS:
        raise EdgeError(
            f"at most {MAX_TOKENS} tokens a request, got {len(parsed)}: split the batch",
            type="payload_too_large",
        )
    out: list[Reported] = []
    for i, entry in enumerate(parsed):
        if not isinstance(entry, dict):
            raise EdgeError(f"[{i}] must be an object with a token", type="invalid_request")
        out.append(
            Reported(
                token=_field(entry, token_field, i, MAX_TOKEN_CHARS, required=True),
                type=_field(entry, "type", i, MAX_FIELD_CHARS),
                url=_field(entry, url_field, i, MAX_FIELD_CHARS),
                source=_field(entry, "source", i, MAX_FIELD_CHARS),
            )
        )
    return out


def candidates(reported: list[Reported]) -> list[Reported]:
    """The reported tokens worth asking authsvc about: well-formed keys, each once."""
    seen: set[str] = set()
    out: list[Reported] = []
    for r in reported:
        if r.token not in seen and r.well_formed:
            seen.add(r.token)
            out.append(r)
    return out


def github_feedback(reported: list[Reported], ours: set[str]) -> list[dict[str, str]]:
    """GitHub's feedback array: per reported token, its SHA-256 and whether it is one of our keys."""
    return [
        {
            "token_hash": r.token_hash,
            "token_type": r.type or TOKEN_TYPE,
            "label": "true_positive" if r.token_hash in ours else "false_positive",
        }
        for r in reported
    ]

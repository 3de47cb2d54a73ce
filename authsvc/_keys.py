"""API key secrets: generation, hashing and display hint (spec §2, decisions.md "Keys"). The format and
its checksum live in svckit.apikeys, shared with the edge. Only the SHA-256 hex digest of the whole
secret is stored.
"""

from __future__ import annotations

import hashlib
import hmac

from svckit.apikeys import RANDOM_LENGTH, checksum, environment_of, issue_prefix, prefix_of
from svckit.ids import random_base62
from svckit.vocabulary import Environment

__all__ = ["Environment", "environment_of", "generate_secret", "hash_secret", "hashes_equal", "hint"]


def generate_secret(environment: Environment) -> str:
    # New keys take the first configured brand (svckit.apikeys.configure_prefixes); the members of
    # svckit.vocabulary.Environment equal svckit.apikeys' literal words.
    body = issue_prefix(environment) + random_base62(RANDOM_LENGTH)  # type: ignore[arg-type]
    return body + checksum(body)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def hashes_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))


def hint(secret: str) -> str:
    prefix = prefix_of(secret) if environment_of(secret) else secret[:9]
    return f"{prefix}...{secret[-4:]}"

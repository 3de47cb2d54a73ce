"""API key secrets: generation, hashing and display hint (spec §2, decisions.md "Keys"). The format and
its checksum live in svckit.apikeys, shared with the edge. Only the SHA-256 hex digest of the whole
secret is stored.
"""

from __future__ import annotations

import hashlib
import hmac

from svckit.apikeys import PREFIX_LENGTH, PREFIXES, RANDOM_LENGTH, checksum, environment_of
from svckit.ids import random_base62
from svckit.vocabulary import Environment

__all__ = ["Environment", "environment_of", "generate_secret", "hash_secret", "hashes_equal", "hint"]


def generate_secret(environment: Environment) -> str:
    # PREFIXES is keyed by svckit.apikeys' literal words, which the members equal.
    body = PREFIXES[environment] + random_base62(RANDOM_LENGTH)  # type: ignore[index]
    return body + checksum(body)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def hashes_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))


def hint(secret: str) -> str:
    env = environment_of(secret)
    prefix = PREFIXES[env] if env else secret[:PREFIX_LENGTH]
    return f"{prefix}...{secret[-4:]}"

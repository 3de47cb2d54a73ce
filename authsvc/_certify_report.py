"""The certification report as authsvc writes and signs it (the format and its verification:
svckit.certreport).

The platform's report-signing key is an Ed25519 key pair; its private half (``crsk_`` + base64 of the
32-byte seed) is authsvc's to hold, the public half is published at ``GET /v1/certification/keys`` with
its key id. A report names the run, the account, the sandbox key the run belonged to, and every check with
its evidence (request ids of the request log, delivery ids of the probes and deliveries).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Sequence
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from authsvc._certify_rules import CheckResult, passed
from svckit import certreport

PRIVATE_PREFIX = "crsk_"
FORMAT_VERSION = 1
_RAW = serialization.Encoding.Raw


def new_signing_key() -> str:
    seed = Ed25519PrivateKey.generate().private_bytes(
        _RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return PRIVATE_PREFIX + base64.b64encode(seed).decode()


def _private(signing_key: str) -> Ed25519PrivateKey:
    if not signing_key.startswith(PRIVATE_PREFIX):
        raise ValueError(f"a report-signing key starts with {PRIVATE_PREFIX}")
    return Ed25519PrivateKey.from_private_bytes(base64.b64decode(signing_key[len(PRIVATE_PREFIX) :]))


def public_key(signing_key: str) -> certreport.PublicKey:
    raw = _private(signing_key).public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    return certreport.PublicKey(certreport.key_id(raw), raw)


def _when(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def build(
    *,
    run_id: str,
    account_id: str,
    key_id: str,
    started_at: dt.datetime,
    ended_at: dt.datetime,
    results: Sequence[CheckResult],
) -> dict[str, Any]:
    """The report of a finished run (unsigned)."""
    return {
        "version": FORMAT_VERSION,
        "runId": run_id,
        "accountId": account_id,
        "apiKeyId": key_id,
        "environment": "sandbox",
        "startedAt": _when(started_at),
        "endedAt": _when(ended_at),
        "passed": passed(results),
        "checks": [
            {"name": r.name, "passed": r.passed, "detail": r.detail, "evidence": list(r.evidence)}
            for r in results
        ],
    }


def sign(report: dict[str, Any], signing_key: str) -> bytes:
    """The report file: ``report`` signed with the platform's key."""
    private = _private(signing_key)
    return certreport.render(
        report, public_key(signing_key).key_id, private.sign(certreport.signed_bytes(report))
    )

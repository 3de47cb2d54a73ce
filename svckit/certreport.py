"""The signed certification report's format, and its verification (standard library only: ``svc certify
verify`` runs offline in the partner tool).

A report file is one JSON object, ``{"report": {...}, "signature": {...}}``, written exactly as
``render`` writes it (keys sorted, two-space indent, ASCII, one trailing newline). The signature is
Ed25519 over ``signed_bytes(report)`` (the report's compact canonical JSON) by the platform's
report-signing key, whose public half is published at ``GET /v1/certification/keys``:

    {"keys": [{"keyId": "crk_...", "algorithm": "ed25519", "publicKey": "crpk_<base64 of 32 bytes>"}]}

``verify`` refuses a file that is not byte for byte as ``render`` writes it, so changing any one byte
fails, including whitespace the JSON parser would forgive; then it checks the signature with the key the
signature names.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from svckit import ed25519verify

PUBLIC_PREFIX = "crpk_"
KEY_ID_PREFIX = "crk_"
ALGORITHM = "ed25519"
KEYS_PATH = "/v1/certification/keys"


class ReportError(Exception):
    """The report does not verify; the message says why (never trust a report that raised this)."""


@dataclass(frozen=True, slots=True)
class PublicKey:
    key_id: str
    raw: bytes

    @property
    def text(self) -> str:
        return PUBLIC_PREFIX + base64.b64encode(self.raw).decode()

    def as_json(self) -> dict[str, str]:
        return {"keyId": self.key_id, "algorithm": ALGORITHM, "publicKey": self.text}


def key_id(raw_public: bytes) -> str:
    """The id a public key is known by: ``crk_`` + the first 16 hex digits of its SHA-256."""
    return KEY_ID_PREFIX + hashlib.sha256(raw_public).hexdigest()[:16]


def parse_public_key(text: str) -> PublicKey:
    """``crpk_`` + base64 of 32 bytes; ValueError otherwise."""
    if not text.startswith(PUBLIC_PREFIX):
        raise ValueError(f"a report-signing public key starts with {PUBLIC_PREFIX}")
    try:
        raw = base64.b64decode(text[len(PUBLIC_PREFIX) :], validate=True)
    except binascii.Error:
        raise ValueError("a report-signing public key is base64 after its prefix") from None
    if len(raw) != 32:
        raise ValueError("a report-signing public key is 32 bytes")
    return PublicKey(key_id(raw), raw)


def parse_keys(document: Mapping[str, Any]) -> list[PublicKey]:
    """The keys of a ``GET /v1/certification/keys`` answer (or a file holding one); ValueError names a
    malformed entry."""
    keys = document.get("keys")
    if not isinstance(keys, list):
        raise ValueError('expected {"keys": [...]}')
    out = []
    for i, entry in enumerate(keys):
        if not isinstance(entry, dict) or entry.get("algorithm") != ALGORITHM:
            raise ValueError(f"keys[{i}]: expected an {ALGORITHM} key")
        key = parse_public_key(str(entry.get("publicKey", "")))
        if entry.get("keyId") != key.key_id:
            raise ValueError(f"keys[{i}]: keyId does not match the key")
        out.append(key)
    return out


def signed_bytes(report: Mapping[str, Any]) -> bytes:
    """What the signature covers: the report's compact canonical JSON (keys sorted, ASCII)."""
    return json.dumps(report, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def render(report: Mapping[str, Any], key: str, signature: bytes) -> bytes:
    """The report file's bytes, signed by the key with id ``key``."""
    document = {
        "report": report,
        "signature": {"algorithm": ALGORITHM, "keyId": key, "value": base64.b64encode(signature).decode()},
    }
    return (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n").encode()


def verify(data: bytes, keys: Iterable[PublicKey]) -> dict[str, Any]:
    """The report of a report file ``data`` whose signature verifies under one of ``keys``; ReportError
    otherwise."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise ReportError("not a report: the file is not JSON") from None
    if not isinstance(document, dict) or set(document) != {"report", "signature"}:
        raise ReportError('not a report: expected {"report": ..., "signature": ...}')
    report, signature = document["report"], document["signature"]
    if not isinstance(report, dict) or not isinstance(signature, dict):
        raise ReportError("not a report: report and signature are objects")
    if signature.get("algorithm") != ALGORITHM:
        raise ReportError(f"the signature is not {ALGORITHM}")
    try:
        value = base64.b64decode(str(signature.get("value", "")), validate=True)
    except binascii.Error:
        raise ReportError("the signature value is not base64") from None
    if render(report, str(signature.get("keyId", "")), value) != data:
        raise ReportError("the file was changed: it is not byte for byte as the platform wrote it")
    key = next((k for k in keys if k.key_id == signature.get("keyId")), None)
    if key is None:
        raise ReportError(f"signed by an unknown key {signature.get('keyId')!r}: fetch {KEYS_PATH} again")
    if not ed25519verify.verify(key.raw, signed_bytes(report), value):
        raise ReportError(
            "the signature does not verify: the report was changed or not signed by the platform"
        )
    return report

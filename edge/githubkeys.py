"""GitHub's secret-scanning signatures: the public keys GitHub signs its reports with, and the check.

GitHub's secret scanning partner program POSTs each batch of found tokens with two headers:
``GITHUB-PUBLIC-KEY-IDENTIFIER`` (which key) and ``GITHUB-PUBLIC-KEY-SIGNATURE`` (base64 of a DER ECDSA
P-256 signature, SHA-256, over the raw body). Its keys are published as JSON,
``{"public_keys": [{"key_identifier", "key" (PEM), "is_current"}]}``, at ``GITHUB_KEYS_URL``.

``KeyList`` keeps the list: fetched from the URL (or read from a file: ``--secret-scanning-github-keys``)
when first needed, kept ``ttl`` seconds, and fetched again early when a report names an identifier it does
not hold (GitHub rotates its keys) -- at most once per ``refetch_floor`` seconds, so a flood of made-up
identifiers costs GitHub's server (or the file system) nothing more.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

log = logging.getLogger(__name__)

GITHUB_KEYS_URL = "https://api.github.com/meta/public_keys/secret_scanning"
IDENTIFIER_HEADER = "github-public-key-identifier"
SIGNATURE_HEADER = "github-public-key-signature"
KEYS_TTL = 3600.0
REFETCH_FLOOR = 60.0
FETCH_TIMEOUT = 5.0
MAX_SIGNATURE = 512  # base64 characters; a P-256 DER signature is about 96

PublicKeys = Mapping[str, ec.EllipticCurvePublicKey]


def parse_key_list(document: bytes) -> dict[str, ec.EllipticCurvePublicKey]:
    """identifier -> P-256 public key of GitHub's key list (``key`` as PEM, or bare base64 SPKI DER).

    Raises ValueError for a document that is not such a list; entries that are not P-256 keys are skipped.
    """
    try:
        parsed = json.loads(document)
        entries = parsed["public_keys"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a key list ({{'public_keys': [...]}}): {exc}") from None
    if not isinstance(entries, list):
        raise ValueError("public_keys must be a list")
    keys: dict[str, ec.EllipticCurvePublicKey] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        identifier, text = entry.get("key_identifier"), entry.get("key")
        if not isinstance(identifier, str) or not isinstance(text, str):
            continue
        key = _public_key(text)
        if key is not None:
            keys[identifier] = key
    return keys


def _public_key(text: str) -> ec.EllipticCurvePublicKey | None:
    try:
        if "-----BEGIN" in text:
            key = serialization.load_pem_public_key(text.encode("ascii"))
        else:
            key = serialization.load_der_public_key(base64.b64decode(text, validate=True))
    except (ValueError, UnsupportedAlgorithm, binascii.Error, UnicodeEncodeError):
        return None
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    return None


def signature_valid(body: bytes, signature_b64: str, key: ec.EllipticCurvePublicKey) -> bool:
    """Is ``signature_b64`` (base64 DER ECDSA) a signature of ``body`` by ``key`` (SHA-256)?"""
    if not signature_b64 or len(signature_b64) > MAX_SIGNATURE:
        return False
    try:
        signature = base64.b64decode(signature_b64, validate=True)
        key.verify(signature, body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


class KeyList:
    """GitHub's public keys from a URL or a file, cached (see the module's docstring)."""

    def __init__(
        self,
        source: str = GITHUB_KEYS_URL,
        *,
        ttl: float = KEYS_TTL,
        refetch_floor: float = REFETCH_FLOOR,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.source = source
        self.ttl = ttl
        self.refetch_floor = refetch_floor
        self.transport = transport
        self._keys: dict[str, ec.EllipticCurvePublicKey] = {}
        self._fetched = -float("inf")
        self._lock = asyncio.Lock()

    async def key(self, identifier: str) -> ec.EllipticCurvePublicKey | None:
        """The key named ``identifier``; None when GitHub's list has no such key (or cannot be had)."""
        now = time.monotonic()
        key = self._keys.get(identifier)
        if key is not None and now - self._fetched < self.ttl:
            return key
        if now - self._fetched >= self.refetch_floor:
            async with self._lock:
                if time.monotonic() - self._fetched >= self.refetch_floor:
                    await self._refresh()
        return self._keys.get(identifier)

    async def _refresh(self) -> None:
        try:
            document = await self._read()
            self._keys = parse_key_list(document)
        except (OSError, ValueError, httpx.HTTPError) as exc:
            # The keys held stay usable; the next try waits refetch_floor seconds.
            log.warning("GitHub's secret-scanning key list unavailable", extra={"error": str(exc)})
        self._fetched = time.monotonic()

    async def _read(self) -> bytes:
        if not self.source.startswith(("https://", "http://")):
            return await asyncio.to_thread(Path(self.source).read_bytes)
        async with httpx.AsyncClient(transport=self.transport, timeout=FETCH_TIMEOUT) as client:
            response = await client.get(self.source, headers={"Accept": "application/json"})
            response.raise_for_status()
            return response.content

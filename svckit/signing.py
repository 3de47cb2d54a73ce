"""Signing webhook deliveries (sender side) and verifying them (receiver side), spec section 6.

Shared by webhookd (which signs every delivery), ``svc listen`` (which signs its local forwards exactly
alike) and ``svc verify``; standard library only, so a partner's tool loads no service to use it (the
partner package, scripts/build_partner_package, carries a copy made at build time).

Header: ``X-Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`` where each ``v1`` is
HMAC-SHA256, keyed by one valid signing secret, over ``f"{t}.".encode() + raw_body``. During a rotation
overlap there is one ``v1`` per valid secret, newest first.

An endpoint may ask for Standard Webhooks headers instead, or both (``SignatureScheme``):
``webhook-id: <event id>``, ``webhook-timestamp: <unix seconds>`` and ``webhook-signature: v1,<base64>
[ v1,<base64>...]``, each HMAC-SHA256 over ``f"{id}.{t}.".encode() + raw_body`` keyed by the secret's
base64 part decoded (the Standard Webhooks spec; the ``standardwebhooks`` library verifies it with the same
``whsec_`` secret). The two schemes key their HMAC differently, each as its own convention says.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import secrets as _secrets
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum

SIGNATURE_HEADER = "X-Service-Signature"
SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE = 300
EVENT_ID_HEADER = "X-Service-Event-Id"
# No docs URL: webhookd knows no host the docs are served on (the edge serves them, at /docs/webhooks on
# its own hosts), and a made-up domain would be a dead link (docs/webhooks.md).
USER_AGENT = "Svc-Webhooks/1.0"
STANDARD_ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"


class SignatureScheme(StrEnum):
    """Which signature headers an endpoint's deliveries carry."""

    STRIPE = "stripe"  # X-Service-Signature (spec section 6): the default
    STANDARD = "standard"  # webhook-id, webhook-timestamp, webhook-signature (Standard Webhooks)
    BOTH = "both"


__all__ = [
    "DEFAULT_TOLERANCE",
    "EVENT_ID_HEADER",
    "SECRET_PREFIX",
    "SIGNATURE_HEADER",
    "STANDARD_ID_HEADER",
    "STANDARD_SIGNATURE_HEADER",
    "STANDARD_TIMESTAMP_HEADER",
    "USER_AGENT",
    "NoMatchingSignature",
    "SignatureFormatError",
    "SignatureScheme",
    "TimestampTooNew",
    "TimestampTooOld",
    "WebhookVerificationError",
    "compute_signature",
    "delivery_headers",
    "header_value",
    "new_secret",
    "parse_header",
    "sign",
    "sign_standard",
    "standard_signature",
    "verify",
    "verify_standard",
]


class WebhookVerificationError(Exception):
    """A delivery whose signature header does not verify. The message never contains a secret.

    Receiver side (no gRPC involved, raised by ``verify``)::

        WebhookVerificationError
        ├── SignatureFormatError          header missing or malformed
        ├── NoMatchingSignature           no v1= matches any of the given secrets
        ├── TimestampTooOld               t is more than ``tolerance`` seconds in the past
        └── TimestampTooNew               t is more than ``tolerance`` seconds in the future
    """


class SignatureFormatError(WebhookVerificationError):
    pass


class NoMatchingSignature(WebhookVerificationError):
    pass


class TimestampTooOld(WebhookVerificationError):
    pass


class TimestampTooNew(WebhookVerificationError):
    pass


def new_secret() -> str:
    """``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(_secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    # The secret string as a whole is the key: partners copy it verbatim, no decoding step to get wrong.
    return secret.encode()


def _unix(now: dt.datetime | int | float) -> int:
    if isinstance(now, dt.datetime):
        return int(now.timestamp())
    return int(now)


def compute_signature(secret: str, timestamp: int, raw_body: bytes) -> str:
    # hmac.digest: OpenSSL's one-shot HMAC, without the hmac.HMAC object (the same bytes, a third faster).
    return hmac.digest(_key(secret), f"{timestamp}.".encode() + raw_body, "sha256").hex()


def sign(secrets: Sequence[str], raw_body: bytes, now: dt.datetime | int | float) -> str:
    """The header value for ``raw_body`` sent at ``now``; ``secrets`` newest first, at least one."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    t = _unix(now)
    return ",".join([f"t={t}", *(f"v1={compute_signature(s, t, raw_body)}" for s in secrets)])


def _standard_key(secret: str) -> bytes:
    """The Standard Webhooks HMAC key: the base64 after ``whsec_``, decoded."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except ValueError:
        raise ValueError("a signing secret for Standard Webhooks is whsec_ + base64") from None


def standard_signature(secret: str, msg_id: str, timestamp: int, raw_body: bytes) -> str:
    """One ``v1,<base64>`` entry of ``webhook-signature``."""
    mac = hmac.digest(_standard_key(secret), f"{msg_id}.{timestamp}.".encode() + raw_body, "sha256")
    return "v1," + base64.b64encode(mac).decode()


def sign_standard(
    secrets: Sequence[str],
    msg_id: str,
    raw_body: bytes,
    now: dt.datetime | int | float,
    signers: Sequence[Callable[[bytes], bytes]] = (),
) -> dict[str, str]:
    """The three Standard Webhooks headers; one ``v1,`` entry per secret, newest first, then one ``v1a,``
    entry per asymmetric signer (ed25519: it signs the same content), all space-separated."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    t = _unix(now)
    entries = [standard_signature(s, msg_id, t, raw_body) for s in secrets]
    if signers:
        content = f"{msg_id}.{t}.".encode() + raw_body
        entries += ["v1a," + base64.b64encode(sign_with(content)).decode() for sign_with in signers]
    return {
        STANDARD_ID_HEADER: msg_id,
        STANDARD_TIMESTAMP_HEADER: str(t),
        STANDARD_SIGNATURE_HEADER: " ".join(entries),
    }


def delivery_headers(
    secrets: Sequence[str],
    body: bytes,
    event_id: str,
    now: dt.datetime | int | float,
    scheme: SignatureScheme = SignatureScheme.STRIPE,
    signers: Sequence[Callable[[bytes], bytes]] = (),
) -> dict[str, str]:
    """The headers of every delivery (``svc listen`` signs its local forwards with this too). The Standard
    Webhooks ``webhook-id`` is the event id: the same on every retry, as that spec asks; ``signers`` add
    ``v1a`` entries to ``webhook-signature`` (the X-Service-Signature header has no such entry)."""
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, EVENT_ID_HEADER: event_id}
    if scheme is not SignatureScheme.STANDARD:
        headers[SIGNATURE_HEADER] = sign(secrets, body, now)
    if scheme is not SignatureScheme.STRIPE:
        headers.update(sign_standard(secrets, event_id, body, now, signers))
    return headers


def parse_header(header: str) -> tuple[int, list[str]]:
    """(timestamp, [v1 signatures]) or SignatureFormatError. Unknown schemes (v0=, v2=) are ignored."""
    if not header or not isinstance(header, str):
        raise SignatureFormatError("signature header is missing or empty")
    timestamp: int | None = None
    sigs: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureFormatError("signature header is not a list of key=value pairs")
        if key == "t":
            if timestamp is not None:
                raise SignatureFormatError("signature header has more than one t=")
            if not value.isdigit():
                raise SignatureFormatError("signature header t= is not a unix timestamp")
            timestamp = int(value)
        elif key == "v1":
            if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
                raise SignatureFormatError("signature header v1= is not 64 lowercase hex characters")
            sigs.append(value)
    if timestamp is None:
        raise SignatureFormatError("signature header has no t=")
    if not sigs:
        raise SignatureFormatError("signature header has no v1=")
    return timestamp, sigs


def verify(
    raw_body: bytes,
    header: str,
    secrets: str | Sequence[str],
    now: dt.datetime | int | float,
    tolerance: int = DEFAULT_TOLERANCE,
) -> int:
    """Check a delivery as a receiver should; returns the signed timestamp.

    ``raw_body`` must be the bytes exactly as received. Accepts the delivery if any ``v1`` matches any
    of ``secrets`` (both during a rotation overlap), compared in constant time, and ``t`` is within
    ``tolerance`` seconds of ``now``. Raises a WebhookVerificationError subclass otherwise.
    """
    if isinstance(secrets, str):
        secrets = [secrets]
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    timestamp, sigs = parse_header(header)
    matched = False
    for secret in secrets:
        expected = compute_signature(secret, timestamp, raw_body)
        for sig in sigs:
            # Every pair is compared (no early exit) so timing says nothing about which one matched.
            matched |= hmac.compare_digest(expected, sig)
    if not matched:
        raise NoMatchingSignature("no v1 signature matches the signing secret(s)")
    return _check_time(timestamp, _unix(now), tolerance)


def header_value(headers: Mapping[str, str], name: str) -> str:
    """``headers[name]`` whatever the case of the names (frameworks differ), or ""."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return ""


def verify_standard(
    raw_body: bytes,
    headers: Mapping[str, str],
    secrets: str | Sequence[str],
    now: dt.datetime | int | float,
    tolerance: int = DEFAULT_TOLERANCE,
) -> int:
    """Check a delivery's Standard Webhooks headers as ``verify`` checks ``X-Service-Signature``; returns
    the signed timestamp. ``headers`` in any case; accepts the delivery if any ``v1,`` entry of
    ``webhook-signature`` matches any of ``secrets`` (constant-time) and ``webhook-timestamp`` is within
    ``tolerance`` seconds of ``now``. ``v1a,`` entries (ed25519) are skipped, as the Standard Webhooks
    libraries skip versions they do not check. Raises the same WebhookVerificationError subclasses."""
    if isinstance(secrets, str):
        secrets = [secrets]
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    msg_id = header_value(headers, STANDARD_ID_HEADER)
    stamp = header_value(headers, STANDARD_TIMESTAMP_HEADER).strip()
    signature = header_value(headers, STANDARD_SIGNATURE_HEADER)
    if not msg_id or not stamp or not signature:
        raise SignatureFormatError("webhook-id, webhook-timestamp or webhook-signature is missing or empty")
    if not stamp.isdigit():
        raise SignatureFormatError("webhook-timestamp is not a unix timestamp")
    timestamp = int(stamp)
    sigs: list[bytes] = []
    for entry in signature.split():
        version, sep, value = entry.partition(",")
        if not sep:
            raise SignatureFormatError("webhook-signature is not a list of version,signature entries")
        if version == "v1":
            try:
                sigs.append(base64.b64decode(value, validate=True))
            except ValueError:
                raise SignatureFormatError("webhook-signature v1 entry is not base64") from None
    if not sigs:
        raise SignatureFormatError("webhook-signature has no v1 entry")
    content = f"{msg_id}.{timestamp}.".encode() + raw_body
    matched = False
    for secret in secrets:
        expected = hmac.new(_standard_key(secret), content, hashlib.sha256).digest()
        for sig in sigs:
            matched |= hmac.compare_digest(expected, sig)
    if not matched:
        raise NoMatchingSignature("no v1 signature of webhook-signature matches the signing secret(s)")
    return _check_time(timestamp, _unix(now), tolerance)


def _check_time(timestamp: int, current: int, tolerance: int) -> int:
    if timestamp < current - tolerance:
        raise TimestampTooOld(f"signature timestamp is {current - timestamp} s old, tolerance {tolerance} s")
    if timestamp > current + tolerance:
        raise TimestampTooNew(
            f"signature timestamp is {timestamp - current} s in the future, tolerance {tolerance} s"
        )
    return timestamp

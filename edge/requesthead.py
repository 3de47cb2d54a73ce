"""Rules for the request head (request line and header fields), checked once per request as soon as the
head is read and before any route runs. Pure; each refusal is an EdgeError naming what is wrong, and the
connection is closed after it (what follows an ambiguous head cannot be trusted).

  1. a head over the size limit: 414 uri_too_long when the request line alone does not fit in it,
     else 431 request_header_fields_too_large (413 stays for bodies)
  2. the request target: only visible ASCII (0x21-0x7E; a raw NUL, control character, DEL or non-ASCII
     byte must be percent-encoded), in origin form (/path), absolute form (http[s]://authority/path)
     or "*"                                                           -> 400 invalid_request
  3. a field name that is not an RFC 9110 token (also a space before the colon, a folded line), a field
     value with a control character other than HTAB (NUL, bare CR or LF) -> 400 invalid_request
  4. Host, Authorization, Idempotency-Key or X-Partner-Customer-Ref on more than one line: which one
     would count is ambiguous (proxies and the edge may each pick another) -> 400 invalid_request
  5. an absolute-form target whose authority is not the Host header (RFC 9112 §3.2.2 would have the
     target win; the edge decides the environment by Host, so the two must agree) -> 400 invalid_request
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from edge.exceptions import EdgeError

SINGLE_FIELDS = ("host", "authorization", "idempotency-key", "x-partner-customer-ref")
_CANONICAL = {name: "-".join(p.capitalize() for p in name.split("-")) for name in SINGLE_FIELDS}
_TARGET = re.compile(r"(?:/[\x21-\x7e]*|\*|[A-Za-z][A-Za-z0-9+.-]*://[\x21-\x7e]*)")
_BAD_TARGET_CHAR = re.compile(r"[^\x21-\x7e]")
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def head_too_large(buffer: bytes | bytearray, limit: int) -> EdgeError:
    """The refusal for a head that did not end within ``limit`` bytes; ``buffer`` holds what arrived."""
    line_end = buffer.find(b"\r\n")
    if line_end == -1 or line_end >= limit:
        return EdgeError(f"the request line (URL) is longer than {limit} bytes", type="uri_too_long")
    return EdgeError(
        f"the request header fields are larger than {limit} bytes", type="request_header_fields_too_large"
    )


def check_target(target: str) -> None:
    if _TARGET.fullmatch(target):
        return
    if _BAD_TARGET_CHAR.search(target):
        raise EdgeError(
            "the request target contains a byte that must be percent-encoded "
            "(a control character, space, DEL or non-ASCII byte)",
            type="invalid_request",
        )
    raise EdgeError(
        "the request target must be a path starting with / or an absolute URL", type="invalid_request"
    )


def check_fields(fields: Iterable[tuple[str, str]], target: str) -> None:
    """``fields``: (lower-case name, value) in the order received; ``target``: the checked request target."""
    seen: dict[str, str] = {}
    for name, value in fields:
        if not _TOKEN.fullmatch(name):
            raise EdgeError(f"the header field name {name.strip()!r} is malformed", type="invalid_request")
        if _BAD_VALUE_CHAR.search(value):
            raise EdgeError(
                f"the {name} header contains a control character (NUL, CR, LF, ...)", type="invalid_request"
            )
        if name in _CANONICAL:
            if name in seen:
                raise EdgeError(
                    f"the {_CANONICAL[name]} header is sent more than once", type="invalid_request"
                )
            seen[name] = value
    absolute = _ABSOLUTE.match(target)
    if absolute is not None:
        authority = absolute.group(1)
        if "@" in authority or authority.lower() != seen.get("host", "").strip().lower():
            raise EdgeError(
                "the request target's authority differs from the Host header", type="invalid_request"
            )


# Rules 3 and 4 over the raw head at once (the request line, then each field line after its CRLF; the
# blank line that ends the head excluded): a few calls into the regex engine instead of two per field.
_HEAD_OK = re.compile(rb"[^\r\n]*(?:\r\n[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\x00-\x08\x0a-\x1f\x7f]*)*")
_HOST, _AUTHORIZATION, _IDEMPOTENCY_KEY, _CUSTOMER_REF = (b"\r\n" + n.encode() + b":" for n in SINGLE_FIELDS)


def head_passes(head: bytes, target: str) -> bool:
    """True when the raw ``head`` certainly passes ``check_fields`` with ``target``: an origin-form
    target (rule 5 has nothing to compare), every field line a token, a colon and a value without a
    control character, no single field repeated. False: ``check_fields`` decides (and names what is
    wrong)."""
    if target[:1] != "/" or _HEAD_OK.fullmatch(head) is None:
        return False
    lower = head.lower()
    return (
        lower.count(_HOST) < 2
        and lower.count(_AUTHORIZATION) < 2
        and lower.count(_IDEMPOTENCY_KEY) < 2
        and lower.count(_CUSTOMER_REF) < 2
    )


def escape_target(target: str) -> str:
    """``target`` with every byte outside 0x21-0x7E percent-encoded (safe to parse and to log)."""
    raw = target.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if 0x21 <= b <= 0x7E else f"%{b:02X}" for b in raw)

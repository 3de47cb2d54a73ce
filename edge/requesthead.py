"""Rules for the request head (request line and header fields), checked once per request as soon as the
head is read and before any route runs. Pure (but for a bounded memory of the field-name sequences that
passed rules 3 and 4); each refusal is an EdgeError naming what is wrong, and the connection is closed
after it (what follows an ambiguous head cannot be trusted).

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
from collections.abc import Collection, Iterable

from edge.exceptions import EdgeError
from svckit.requesttarget import escape_target, request_line_too_long

__all__ = [
    "check_fields",
    "check_raw_names",
    "check_target",
    "escape_target",
    "head_passes",
    "head_too_large",
    "names_pass",
]

SINGLE_FIELDS = ("host", "authorization", "idempotency-key", "x-partner-customer-ref")
_CANONICAL = {name: "-".join(p.capitalize() for p in name.split("-")) for name in SINGLE_FIELDS}
_TARGET = re.compile(r"(?:/[\x21-\x7e]*|\*|[A-Za-z][A-Za-z0-9+.-]*://[\x21-\x7e]*)")
_BAD_TARGET_CHAR = re.compile(r"[^\x21-\x7e]")
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def head_too_large(buffer: bytes | bytearray, limit: int) -> EdgeError:
    """The refusal for a head that did not end within ``limit`` bytes; ``buffer`` holds what arrived."""
    if request_line_too_long(buffer, limit):
        return EdgeError(f"the request line (URL) is longer than {limit} bytes", type="uri_too_long")
    return EdgeError(
        f"the request header fields are larger than {limit} bytes", type="request_header_fields_too_large"
    )


def check_target(target: str) -> None:
    if target[:1] == "/" and target.isascii() and target.isprintable() and " " not in target:
        return  # origin form, visible ASCII only: the common case, without the regular expression
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


# The fast check for rules 3 and 4 (head_passes). Sanic's parser has already split the head at each CRLF
# into one (lower-cased name, value) per line, every line with a colon, the target ASCII without a space.
_CONTROLS = bytes([*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F])  # HTAB is allowed in a value
_TOKEN_OR_COLON = b"!#$%&'*+.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-:"
_SINGLES = tuple(f":{name}:" for name in SINGLE_FIELDS)  # ":host::host:" counts 2
# Name sequences (":host::accept:...:") that passed rules 3 and 4: those rules depend on the names alone, and
# a client library sends the same names on every request whatever its path, values or key. Bounded.
MAX_NAME_SEQUENCES = 256
MAX_NAME_SEQUENCE_CHARS = 1024  # at most 256 KiB held
_names_passed: set[str] = set()


def names_pass(names: str) -> bool:
    """``names``: one or more field names as Sanic parsed them (lower-case), each between two colons of its
    own (":host::accept:"; a colon ends a name, so none contains one). True when each is
    an RFC 9110 token and none of SINGLE_FIELDS appears twice."""
    if names in _names_passed:
        return True
    if (
        not names.isascii()
        or names.encode().translate(None, _TOKEN_OR_COLON)
        or names == "::"
        or ":::" in names  # an empty name
        or any(names.count(single) > 1 for single in _SINGLES)
    ):
        return False
    if len(_names_passed) < MAX_NAME_SEQUENCES and len(names) <= MAX_NAME_SEQUENCE_CHARS:
        _names_passed.add(names)
    return True


def head_passes(head: bytes, names: Collection[str], target: str) -> bool:
    """True when the raw ``head`` (no final blank line), with ``names`` the lower-case field names Sanic
    parsed from it (one per line after the request line), certainly passes ``check_fields`` with
    ``target``: an origin-form target (rule 5 has nothing to compare), no control character but HTAB
    beyond the CRLF ending each line, every name a token, no single field repeated. False:
    ``check_fields`` decides (and names what is wrong)."""
    return (
        target[:1] == "/"
        and len(head) - len(head.translate(None, _CONTROLS)) == 2 * len(names)
        and (not names or names_pass(":" + "::".join(names) + ":"))
    )


_RAW_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def check_raw_names(head: bytes) -> None:
    """Rule 3 on the bytes received. Sanic decodes the head as UTF-8 and lower-cases each name, which can
    turn a name that is not a token into one that is (the Kelvin sign U+212A lower-cases to "k", so
    "Idempotency-\u212aey" would count as Idempotency-Key while a proxy in front sees another field):
    a head that is not ASCII has its names checked as sent."""
    for line in head.split(b"\r\n")[1:]:
        name = line.split(b":", 1)[0]
        if not _RAW_TOKEN.fullmatch(name):
            shown = name.decode("ascii", "backslashreplace").strip()
            raise EdgeError(f"the header field name {shown!r} is malformed", type="invalid_request")

"""What a server answers when a request's head cannot be read as one: the request line too long (414, not
Sanic's 413 for a whole head), or a target holding a byte that must be percent-encoded (400). Sanic's own
error path parses the target again for its stand-in request, and a target it refused failed there too:
the error went unanswered, the connection dropped with a traceback (issue 34). ``escape_target`` makes
a target safe to parse and to log. The edge answers these in its error body (edge.requesthead); the
portal with its error page (svckit.webserver.ServerHttp)."""

from __future__ import annotations

from sanic.exceptions import BadRequest, SanicException

BAD_TARGET_MESSAGE = (
    "the request target contains a byte that must be percent-encoded (a control character, space, DEL "
    "or non-ASCII byte)"
)


class URITooLong(SanicException):
    status_code = 414
    quiet = True


class HeaderFieldsTooLarge(SanicException):
    status_code = 431
    quiet = True


def request_line_too_long(buffer: bytes | bytearray, limit: int) -> bool:
    """Is the request line the reason a head did not end within ``limit`` bytes (else its fields are)?
    ``buffer`` holds what arrived."""
    line_end = buffer.find(b"\r\n")
    return line_end == -1 or line_end >= limit


def head_too_large(buffer: bytes | bytearray, limit: int) -> SanicException:
    """The refusal for a head that did not end within ``limit`` bytes: 414 or 431."""
    if request_line_too_long(buffer, limit):
        return URITooLong(f"the request line (URL) is longer than {limit} bytes")
    return HeaderFieldsTooLarge(f"the request header fields are larger than {limit} bytes")


def clean_target(target: str) -> bool:
    """Visible ASCII only (no control character, space, DEL or non-ASCII byte)."""
    return target.isascii() and target.isprintable() and " " not in target


def bad_target(target: str) -> BadRequest | None:
    """The 400 for a target that is not clean, or None."""
    return None if clean_target(target) else BadRequest(BAD_TARGET_MESSAGE)


def escape_target(target: str) -> str:
    """``target`` with every byte outside 0x21-0x7E percent-encoded (safe to parse and to log)."""
    raw = target.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if 0x21 <= b <= 0x7E else f"%{b:02X}" for b in raw)

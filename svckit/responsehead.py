"""The plain HTTP/1.1 response head, read without h11: ``plain_head`` takes a head only when its framing
is the ordinary one (HTTP/1.1, a final status, exactly one ``Content-Length``, no ``Transfer-Encoding``)
and every field is well formed. Anything else is None, and ``svckit.http`` hands the bytes to h11, which
reads (or refuses) it as before. Pure.

Why: h11's state machine cost the edge about a third of a proxied request's instructions, nearly all of it
on answers of this plain shape. The checks are h11's grammar done with ``bytes`` methods: regular
expressions over the head cost about 18,000 instructions per answer, these about a third of that.
"""

from __future__ import annotations

__all__ = ["PlainHead", "plain_head"]

# What a head may hold besides CR LF: HTAB, SP, visible ASCII and obs-text (no other control, no DEL).
_TEXT = bytes([9, 10, 13, *range(0x20, 0x7F), *range(0x80, 0x100)])
_TOKEN = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# (status, fields as received (names in their own case), body length, the server closes after it)
PlainHead = tuple[int, list[tuple[bytes, bytes]], int, bool]


def plain_head(head: bytes) -> PlainHead | None:
    """``head``: the status line and field lines, each ending in CRLF, without the empty line."""
    if head[:9] != b"HTTP/1.1 ":
        return None
    lines = head.split(b"\r\n")
    n = len(lines) - 1
    # Every line ends in CRLF and no CR or LF stands alone; no byte outside _TEXT anywhere.
    if lines[-1] or head.count(b"\r") != n or head.count(b"\n") != n or head.translate(None, _TEXT):
        return None
    first = lines[0]
    code = first[9:12]
    if not (code.isdigit() and b"2" <= code[:1] <= b"5") or first[12:13] not in (b"", b" "):
        return None  # 1xx (interim) answers are h11's
    status = int(code)
    if status == 204 or status == 304:  # no body whatever Content-Length says
        return None
    fields: list[tuple[bytes, bytes]] = []
    length = -1
    close = False
    for line in lines[1:n]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name.translate(None, _TOKEN):
            return None  # no colon, an empty name, or one that is not a token (also obsolete folding)
        value = value.strip(b" \t")
        lower = name.lower()
        if lower == b"content-length":
            if length >= 0 or not value.isdigit() or len(value) > 18:
                return None
            length = int(value)
        elif lower == b"transfer-encoding":
            return None
        elif lower == b"connection" and b"close" in value.lower():
            close = True
        fields.append((name, value))
    if length < 0:
        return None
    return status, fields, length, close

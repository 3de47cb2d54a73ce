"""Where a page of ListAuditEvents starts and the token of the next one, in either order. Pure.

The trail is read by its sequence number (``seq``, one per event, increasing): oldest first a page is
the events after the last one shown, newest first the events before it. A token names the order it was
made for (oldest first keeps the token format it always had), so one sent with the other order is an
invalid request rather than a page that silently skips or repeats events.
"""

from __future__ import annotations

from svckit.pages import BadPageToken, page_parts, page_token

__all__ = ["NEWEST_FIRST", "WRONG_ORDER", "WrongOrder", "audit_page_start", "audit_page_token"]

# The first part of a newest-first token.
NEWEST_FIRST = "newest"
WRONG_ORDER = (
    "page_token: continues a listing in the other order; send the newest_first of the request that "
    "returned it"
)


class WrongOrder(ValueError):
    def __init__(self) -> None:
        super().__init__(WRONG_ORDER)


def _seq(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise BadPageToken
    return int(text)


def audit_page_start(token: str, newest_first: bool) -> int:
    """The sequence number a page continues from (0: the first page): it holds the events after it
    (oldest first) or before it (newest first). BadPageToken for a token this service did not make,
    WrongOrder for one made for the other order."""
    if not token:
        return 0
    try:
        parts = page_parts(token, 2)
    except BadPageToken:
        (seq,) = page_parts(token, 1)
        if newest_first:
            _seq(seq)  # a well-formed oldest-first token: the order is what is wrong
            raise WrongOrder from None
        return _seq(seq)
    if parts[0] != NEWEST_FIRST:
        raise BadPageToken
    start = _seq(parts[1])
    if not newest_first:
        raise WrongOrder
    return start


def audit_page_token(last_seq: int, newest_first: bool) -> str:
    """The token of the page after one whose last event has ``last_seq``."""
    return page_token(NEWEST_FIRST, last_seq) if newest_first else page_token(last_seq)

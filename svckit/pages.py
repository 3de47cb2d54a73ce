"""Page tokens, one format for every list RPC: opaque to the caller, the position after the page's last
row inside (its sort key and id, or a sequence number), base64url of the parts joined by ``|``."""

from __future__ import annotations

import base64
import binascii

__all__ = ["BAD_PAGE_TOKEN", "BadPageToken", "page_parts", "page_token"]

BAD_PAGE_TOKEN = "page_token: not a token returned by this service"


class BadPageToken(ValueError):
    """A token this service did not make (each service answers it with its invalid_request)."""

    def __init__(self) -> None:
        super().__init__(BAD_PAGE_TOKEN)


def page_token(*parts: object) -> str:
    return base64.urlsafe_b64encode("|".join(str(p) for p in parts).encode()).decode()


def page_parts(token: str, n: int) -> list[str]:
    """The ``n`` parts of ``token``; BadPageToken if it has another number or is not one at all."""
    try:
        parts = base64.urlsafe_b64decode(token.encode("ascii")).decode().split("|")
    except (ValueError, UnicodeError, binascii.Error):
        raise BadPageToken from None
    if len(parts) != n:
        raise BadPageToken
    return parts

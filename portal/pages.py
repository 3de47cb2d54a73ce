"""The one list page: a page of items from authsvc or webhookd, with the errors of a refused form or
filter beside their fields."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sanic.response import HTTPResponse

from portal.context import PortalRequest
from portal.web import render
from svckit.clients import ClientError

PAGE_SIZE = 25


@dataclass(frozen=True)
class Listing:
    items: Sequence[Any]
    next_page: str = ""
    # What else the reply gives the page (the current session of the sessions list).
    context: Mapping[str, Any] = field(default_factory=dict)


async def list_page(
    request: PortalRequest,
    template: str,
    items: str,
    fetch: Callable[[], Awaitable[Listing]],
    status: int = 200,
    **context: Any,
) -> HTTPResponse:
    """``template`` with the listing ``fetch`` gets as ``items``; a refused request (400, a bad filter)
    is shown beside its field over an empty list. ``errors`` in ``context`` are those of a refused form
    the page carries."""
    try:
        got = await fetch()
    except ClientError as exc:
        if exc.status != 400:
            raise
        errors = {exc.field or "form": exc.message, **context.pop("errors", {})}
        return render(request, template, status=400, next_page="", errors=errors, **{items: []}, **context)
    return render(
        request,
        template,
        status=status,
        next_page=got.next_page,
        **{items: list(got.items)},
        **got.context,
        **context,
    )

"""The API's resources, one table: what each is, its actions (its scopes are ``<resource>:<action>``),
whether it is a product, and whether a read-only account may still write it. Standard library only (``svc``,
the partners' CLI, and the event catalog's schemas read it too).

Everything that lists scopes or products is derived from ``TABLE``: ``ALL_SCOPES`` (authsvc's validation,
the portal's scope checkboxes, svcctl's demo key, OpenAPI's scope enum), ``ROUTE_SCOPES`` (what a route of
the edge's route table may require), ``PRODUCTS`` (the ledger's read scopes, ``svc trigger --product``, the
booking and eSIM event schemas' ``product``), ``WRITABLE_WHEN_READ_ONLY`` (authsvc's read-only rule,
``authsvc._decision.business_write``) and the scope table of docs/authentication.md
(``scripts/gen_scope_docs.py``). Adding a resource is one row here, then the docs (docs/architecture.md
"Two exercises"); a resource has only the actions its row names, so ``loyalty`` with ``("read",)`` brings
``loyalty:read`` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# Every action a resource may have, with what it means (the docs' table).
ACTION_MEANINGS: Final = {
    "read": "searching, retrieving offers and rates, reading bookings, usage and ledger entries",
    "write": "creating bookings and orders, cancelling, modifying, deleting customer records",
}


@dataclass(frozen=True)
class Resource:
    name: str
    description: str  # what it covers, for a person (the docs' table)
    actions: tuple[str, ...] = ("read", "write")
    # A product the edge fronts: its routes' upstream is a product service, its events carry ``product``.
    # ``subject`` is what the product's events are about: "booking" or "order" ("" for a non-product).
    product: bool = False
    subject: str = ""
    # A product route of the edge's route table may require its scopes (every product's may).
    on_routes: bool = False
    # A read-only account (after an unpaid settlement charge) may still write it; writes of every other
    # resource are business (bookings, orders, changes, cancellations, spend) and refused.
    writable_when_read_only: bool = False
    why_writable: str = ""  # when it is: why, for a person (the docs)

    def __post_init__(self) -> None:
        unknown = [a for a in self.actions if a not in ACTION_MEANINGS]
        if unknown or not self.actions:
            raise ValueError(
                f"resource {self.name!r}: actions {self.actions!r} not among {list(ACTION_MEANINGS)}"
            )
        if self.product != (self.subject in ("booking", "order")):
            raise ValueError(f"resource {self.name!r}: a product's subject is booking or order, no other's")

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(f"{self.name}:{a}" for a in self.actions)

    @property
    def routable(self) -> bool:
        return self.product or self.on_routes


# The one list of resources, in the canonical order scopes are stored in.
TABLE: Final[tuple[Resource, ...]] = (
    Resource("hotels", "hotel search, offers, rates, bookings", product=True, subject="booking"),
    Resource("flights", "flight search, offers, bookings", product=True, subject="booking"),
    Resource("esim", "eSIM plans and orders", product=True, subject="order"),
    Resource(
        "account",
        "own account, ledger, usage, traveller records",
        on_routes=True,
        writable_when_read_only=True,
        why_writable="deleting a traveller's record is a privacy duty the partner must be able to meet "
        "at any time",
    ),
    Resource(
        "webhooks",
        "webhook endpoint management",
        writable_when_read_only=True,
        why_writable="so the partner can receive the settlement events that tell it why, and what to do",
    ),
)

BY_NAME: Final[dict[str, Resource]] = {r.name: r for r in TABLE}
RESOURCES: Final[tuple[str, ...]] = tuple(BY_NAME)
PRODUCTS: Final[tuple[str, ...]] = tuple(r.name for r in TABLE if r.product)
# Products whose events are about a booking (hotels, flights), and about an eSIM order (esim).
BOOKING_PRODUCTS: Final[tuple[str, ...]] = tuple(r.name for r in TABLE if r.subject == "booking")
ORDER_PRODUCTS: Final[tuple[str, ...]] = tuple(r.name for r in TABLE if r.subject == "order")
# What a product route of the edge's route table may require: a product's scope, or the account's.
ROUTE_RESOURCES: Final[tuple[str, ...]] = tuple(r.name for r in TABLE if r.routable)
ACTIONS: Final[tuple[str, ...]] = tuple(a for a in ACTION_MEANINGS if any(a in r.actions for r in TABLE))
ALL_SCOPES: Final[tuple[str, ...]] = tuple(s for r in TABLE for s in r.scopes)
ROUTE_SCOPES: Final[frozenset[str]] = frozenset(s for r in TABLE if r.routable for s in r.scopes)
WRITABLE_WHEN_READ_ONLY: Final[frozenset[str]] = frozenset(r.name for r in TABLE if r.writable_when_read_only)
# The scopes a read-only account's keys may not use to write: every write scope of the other resources.
BUSINESS_WRITE_SCOPES: Final[tuple[str, ...]] = tuple(
    f"{r.name}:write" for r in TABLE if "write" in r.actions and not r.writable_when_read_only
)


def read_scopes(resources: tuple[str, ...]) -> tuple[str, ...]:
    """The read scopes of ``resources`` that have one (e.g. every product's, for the ledger)."""
    return tuple(f"{n}:read" for n in resources if "read" in BY_NAME[n].actions)

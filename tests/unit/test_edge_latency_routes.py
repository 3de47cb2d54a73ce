"""edge.metrics.route_template: the route label of the latency histogram is a template, never a path."""

from __future__ import annotations

import pytest

from edge.metrics import route_template


@pytest.mark.parametrize(
    ("route", "template"),
    [
        ("v1/account", "/v1/account"),  # a Sanic route's path
        ("v1/hotels/offers/<offer_id:str>", "/v1/hotels/offers/{offer_id}"),
        ("v1/customers/<ref>", "/v1/customers/{ref}"),
        ("v1/webhooks/endpoints/<endpoint_id:str>/rotate", "/v1/webhooks/endpoints/{endpoint_id}/rotate"),
        ("/v1/hotels/bookings/{booking_id}", "/v1/hotels/bookings/{booking_id}"),  # a product route's
        ("v1/<rest:path>", "/v1/{rest}"),
    ],
)
def test_route_template(route: str, template: str) -> None:
    assert route_template(route) == template

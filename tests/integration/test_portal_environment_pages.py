"""A key or endpoint page answers only under its own environment: a live key is never shown, rotated or
revoked under /sandbox/... (nor a sandbox endpoint under /live/...): 404, over real HTTP."""

from __future__ import annotations

from tests.integration.portal_stack import OPS, Stack, stack  # noqa: F401
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.webhooks.v1 import webhooks_pb2 as wpb


async def test_the_url_environment_is_the_keys_and_the_endpoints(stack: Stack) -> None:  # noqa: F811
    live = await stack.auth.CreateKey(
        apb.CreateKeyRequest(
            account_id=stack.account_id,
            environment=apb.ENVIRONMENT_LIVE,
            name="production",
            scopes=["account:read"],
            actor=OPS,
        )
    )
    endpoint = await stack.hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=stack.account_id,
            environment=wpb.ENVIRONMENT_SANDBOX,
            url="http://127.0.0.1:9/sandbox",
            events=["booking.confirmed"],
        )
    )
    key_id, endpoint_id = live.key.id, endpoint.endpoint.id
    browser = await stack.join("owner@acme.example")
    try:
        assert (await browser.get(f"/live/keys/{key_id}")).status_code == 200
        token = csrf_of((await browser.get("/live/keys")).text)
        for path in (
            f"/sandbox/keys/{key_id}",
            f"/sandbox/keys/{key_id}/rotate",
            f"/sandbox/keys/{key_id}/secret",
        ):
            assert (await browser.get(path)).status_code == 404, path
        for action, form in (
            ("revoke", {"reason": "wrong page", "confirm": "production"}),
            ("rotate", {"grace": "0"}),
            ("edit", {"name": "renamed", "scopes": "account:read"}),
        ):
            got = await browser.post(f"/sandbox/keys/{key_id}/{action}", data={"csrf": token, **form})
            assert got.status_code == 404, (action, got.status_code)
        after = await stack.auth.GetKey(apb.GetKeyRequest(key_id=key_id))
        assert after.key.status == apb.KEY_STATUS_ACTIVE and after.key.name == "production"

        assert (await browser.get(f"/sandbox/webhooks/{endpoint_id}")).status_code == 200
        assert (await browser.get(f"/live/webhooks/{endpoint_id}")).status_code == 404
        got = await browser.post(f"/live/webhooks/{endpoint_id}/delete", data={"csrf": token})
        assert got.status_code == 404
    finally:
        await browser.aclose()

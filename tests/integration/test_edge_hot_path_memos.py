"""What the edge remembers on its hot path changes no answer (edge.gate): the Accept values that passed,
and a keep-alive connection's credential, are looked up instead of recomputed, and any other value on
the same connection is still checked."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import httpx

from tests.integration.edge_stack import Stack, assert_error, auth, hdrs, http, new_key, stack  # noqa: F401 (the fixtures)
from travel.auth.v1 import auth_pb2_grpc


async def test_accept_values_on_one_connection(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, "sandbox", ["account:read"])
    url = stack.url() + "/v1/account"
    for accept, status in [
        ("*/*", 200),
        ("text/html", 406),
        ("application/json", 200),
        ("*/*", 200),
        ("application/json;q=0", 406),
        ("text/html", 406),
        (None, 200),
    ]:
        headers = hdrs(key.secret) if accept is None else hdrs(key.secret, Accept=accept)
        resp = await http.get(url, headers=headers)
        if status == 406:
            assert_error(resp, 406, "not_acceptable")
        else:
            assert resp.status_code == 200, resp.text
    # The connection's credential memo: another key, then a garbage one, on the same connection.
    _, other = await new_key(auth, "sandbox", ["hotels:read"])
    assert_error(await http.get(url, headers=hdrs(other.secret)), 403, "missing_scope")
    assert_error(await http.get(url, headers=hdrs("svc_test_garbage")), 401, "invalid_api_key")
    assert (await http.get(url, headers=hdrs(key.secret))).status_code == 200

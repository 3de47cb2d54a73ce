"""Requests for the test_auth_*.py modules that run authsvc over real gRPC on loopback."""

from __future__ import annotations

from travel.auth.v1 import auth_pb2 as pb

LIVE, SANDBOX = pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX


def authz(
    secret: str,
    scope: str = "hotels:read",
    env: pb.Environment.ValueType = LIVE,
    source: str = "192.0.2.1",
    write: bool = False,
) -> pb.AuthorizeRequest:
    return pb.AuthorizeRequest(
        api_key=secret, environment=env, required_scope=scope, source_address=source, is_write=write
    )

"""The client distribution as a product team gets it: built by scripts/build_client_package, installed with
pip into a fresh venv in a directory outside the repository (no system site-packages, no PYTHONPATH, run
from that directory), where no server library is importable; then docs/product-services.md's example,
examples/product_hotels.py copied out of the repository, run with that venv's Python as ``product:hotels``
against authsvc and webhookd started as real processes with one development CA (webhookd asking authsvc
for the account's mode over the same mutual TLS): the booking is authorized, its search counted and its
``booking.confirmed`` stored, once however often it is sent."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from authsvc.testing import ACTOR
from svckit.clients import AuthClient, HooksClient
from svckit.devca import files
from svckit.secretbox import new_key
from tests.support import (
    ROOT,
    ServiceProcess,
    VenvOutside,
    built_wheel,
    sqlite_url,
    start_service,
    tls_args,
    tls_of,
)
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb

PRODUCT = "product:hotels"
# What a product service must not get with the clients: the servers' libraries, and the servers.
SERVER_LIBRARIES = (
    "sanic",
    "sqlalchemy",
    "alembic",
    "redis",
    "opentelemetry",
    "prometheus_client",
    "httpx",
    "authsvc",
    "webhookd",
    "edge",
    "portal",
)

# The product team's own program around the example (outside the repository, like the example's copy).
DRIVER = """
import asyncio, json, sys
from product_hotels import Booking, Refused, confirm_booking, connect

async def main() -> None:
    good, read_only = sys.argv[1], sys.argv[2]
    booking = Booking("bk_pkg1", "off_hotels_1", 25800, "EUR", "HX-1", "hold_pkg1")
    auth, hooks = connect("HOTELS")
    async with auth, hooks:
        first = await confirm_booking(auth, hooks, good, booking, live=True, request_id="req_pkg1")
        again = await confirm_booking(auth, hooks, good, booking, live=True, request_id="req_pkg2")
        try:
            await confirm_booking(auth, hooks, read_only, booking, live=True, request_id="req_pkg3")
            refused = ""
        except Refused as exc:
            refused = exc.type
    import svckit
    print(json.dumps({
        "events": [first, again], "refused": refused, "svckit": svckit.__file__,
        "loaded": sorted({m.split(".")[0] for m in sys.modules}),
    }))

asyncio.run(main())
"""


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The wheel scripts/build_client_package builds, once per session."""
    return built_wheel("build_client_package.py", tmp_path_factory.mktemp("clients-dist"), "travel_clients")


@pytest.fixture(scope="session")
def product(tmp_path_factory: pytest.TempPathFactory, wheel: pathlib.Path) -> VenvOutside:
    return VenvOutside.made(tmp_path_factory.mktemp("product-home"), str(wheel))


def test_the_distribution_installs_alone_and_carries_no_server(product: VenvOutside) -> None:
    code = (
        "import svckit.clients, svckit.tls, svckit.scopes, svckit.catalog, travel.auth.v1.auth_pb2_grpc; "
        "print(svckit.clients.__file__)"
    )
    where = product.python(code)
    assert where.returncode == 0, where.stderr.decode()
    assert pathlib.Path(where.stdout.decode().strip()).is_relative_to(product.venv)
    for name in SERVER_LIBRARIES:
        refused = product.python(f"import {name}")
        assert refused.returncode == 1 and b"ModuleNotFoundError" in refused.stderr, name
    # The serving rooms' modules are not carried either (svckit/rooms.py).
    for module in ("svckit.grpc_server", "svckit.db", "svckit.tracing", "svckit.tlsflags"):
        missing = product.python(f"import {module}")
        assert b"ModuleNotFoundError" in missing.stderr, module
    listed = product.run(str(product.venv / "bin" / "pip"), "list", "--format", "json")
    installed = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert {"travel-clients", "grpcio", "protobuf", "cryptography", "jsonschema"} <= installed


# -- against authsvc and webhookd ----------------------------------------------------------------------
@dataclass
class Stack:
    authsvc: ServiceProcess
    webhookd: ServiceProcess


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, pki: pathlib.Path) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("clients-stack")
    procs: list[ServiceProcess] = []
    secrets_key = tmp / "webhookd-secrets.key"
    secrets_key.write_text(new_key())
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"), tls=tls_args(pki, "authsvc"))
        procs.append(auth)
        hooks = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"), "--authsvc", auth.grpc_target,
            "--secrets-key-file", str(secrets_key), tls=tls_args(pki, "webhookd"),
        )  # fmt: skip
        procs.append(hooks)
        yield Stack(auth, hooks)
    finally:
        for proc in reversed(procs):
            proc.terminate()


async def test_the_product_example_runs_on_the_installed_clients(
    product: VenvOutside, stack: Stack, pki: pathlib.Path
) -> None:
    async with AuthClient(stack.authsvc.grpc_target, tls_of(pki, "svcctl")) as admin:
        account = (
            await admin.create_account(
                pb.CreateAccountRequest(
                    name="Partner", mode=pb.ACCOUNT_MODE_A, daily_search_allowance=100, actor=ACTOR
                )
            )
        ).account
        keys = [
            await admin.create_key(
                pb.CreateKeyRequest(
                    account_id=account.id, environment=pb.ENVIRONMENT_LIVE, scopes=scopes, actor=ACTOR
                )
            )
            for scopes in (["hotels:read", "hotels:write"], ["hotels:read"])
        ]
    shutil.copy(ROOT / "examples" / "product_hotels.py", product.home / "product_hotels.py")
    (product.home / "run_example.py").write_text(DRIVER)
    ca, cert, key = files(pki, PRODUCT)
    env = {
        "HOTELS_TLS_CA": ca,
        "HOTELS_TLS_CERT": cert,
        "HOTELS_TLS_KEY": key,
        "HOTELS_AUTHSVC": stack.authsvc.grpc_target,
        "HOTELS_WEBHOOKD": stack.webhookd.grpc_target,
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [str(product.venv / "bin" / "python"), "run_example.py", keys[0].secret, keys[1].secret],
        cwd=product.home, env={**product.env, **env}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert pathlib.Path(said["svckit"]).is_relative_to(product.venv)
    assert not set(said["loaded"]) & set(SERVER_LIBRARIES)
    first, again = said["events"]
    assert first.startswith("evt_") and again == first  # the idempotency key: one event
    assert said["refused"] == "missing_scope"

    async with (
        AuthClient(stack.authsvc.grpc_target, tls_of(pki, "svcctl")) as admin,
        HooksClient(stack.webhookd.grpc_target, tls_of(pki, "svcctl")) as hooks,
    ):
        usage = await admin.get_usage(pb.GetUsageRequest(account_id=account.id))
        read = wpb.GetEventRequest(account_id=account.id, environment=wpb.ENVIRONMENT_LIVE, event_id=first)
        event = (await hooks.get_event(read)).event
    assert usage.usage.searches_used == 2  # each confirmation counted its search
    envelope = json.loads(event.envelope_json)
    assert (envelope["type"], envelope["account"], envelope["livemode"]) == (
        "booking.confirmed",
        account.id,
        True,
    )
    assert envelope["data"]["hold"] == "hold_pkg1" and envelope["data"]["booking"] == "bk_pkg1"

"""Mutual TLS between the services: real authsvc and webhookd servers on port 0 requiring client
certificates from the development CA, and the per-RPC allow list of callers."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from authsvc._server import AuthServer
from authsvc.testing import ACTOR
from svckit.devca import files, stem
from svckit.errors import type_from_rpc_error
from svckit.tls import Tls, TlsError, channel
from tests.support import ROOT, event_data, tls_args, tls_of
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc
from webhookd._server import Webhookd


def auth_stub(
    port: int, tls: Tls | None, server: str = "authsvc"
) -> tuple[grpc.aio.Channel, auth_pb2_grpc.AuthServiceStub]:
    ch = channel(f"127.0.0.1:{port}", tls, server)
    return ch, auth_pb2_grpc.AuthServiceStub(ch)


async def code_of(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await call  # type: ignore[misc]
    return failed.value.code()


def create_account() -> pb.CreateAccountRequest:
    return pb.CreateAccountRequest(name="Partner", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)


async def test_svcctl_certificate_may_administer(authsvc: AuthServer, pki: pathlib.Path) -> None:
    ch, stub = auth_stub(authsvc.port, tls_of(pki, "svcctl"))
    async with ch:
        account = (await stub.CreateAccount(create_account(), timeout=10)).account
        created = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account.id, environment=pb.ENVIRONMENT_SANDBOX, scopes=["hotels:read"], actor=ACTOR
            ),
            timeout=10,
        )
        assert created.secret.startswith("svc_test_")
        # The audit trail names the calling service (from its certificate, whatever the request claims)
        # and the user it vouches for.
        forged = pb.Actor(user="ops:alice", service="edge")
        await stub.RevokeKey(
            pb.RevokeKeyRequest(key_id=created.key.id, reason="test", actor=forged), timeout=10
        )
        trail = await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id), timeout=10)
        actors = {(e.action, e.actor.user, e.actor.service) for e in trail.events}
        assert actors == {
            ("account.created", ACTOR.user, "svcctl"),
            ("key.created", ACTOR.user, "svcctl"),
            ("key.revoked", "ops:alice", "svcctl"),
        }


async def test_edge_certificate_may_authorize_but_not_create_keys(
    authsvc: AuthServer, pki: pathlib.Path
) -> None:
    ch, admin = auth_stub(authsvc.port, tls_of(pki, "svcctl"))
    async with ch:
        account = (await admin.CreateAccount(create_account(), timeout=10)).account
    ch, edge = auth_stub(authsvc.port, tls_of(pki, "edge"))
    async with ch:
        answer = await edge.Authorize(
            pb.AuthorizeRequest(api_key="svc_test_nope", environment=pb.ENVIRONMENT_SANDBOX), timeout=10
        )
        assert answer.decision == pb.DECISION_DENY
        refused = pb.CreateKeyRequest(account_id=account.id, environment=pb.ENVIRONMENT_LIVE, actor=ACTOR)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await edge.CreateKey(refused, timeout=10)
        assert failed.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "'edge' may not call /travel.auth.v1.AuthService/CreateKey" in (failed.value.details() or "")
        # A client (the edge, svcctl) reads it as our fault, never as the partner's missing scope.
        assert type_from_rpc_error(failed.value)[0] == "internal_error"
        assert (
            await code_of(edge.CreateAccount(create_account(), timeout=10))
            == grpc.StatusCode.PERMISSION_DENIED
        )
        assert await code_of(
            edge.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id), timeout=10)
        ) == (grpc.StatusCode.PERMISSION_DENIED)
        # The edge may watch key changes (a stream); health is open to every certificate of our CA.
        first = await edge.WatchKeyChanges(pb.WatchKeyChangesRequest(), timeout=10).read()
        assert first.kind == pb.KEY_CHANGE_KIND_SYNC
        health = health_pb2_grpc.HealthStub(ch)
        status = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert status.status == health_pb2.HealthCheckResponse.SERVING
    ch, admin = auth_stub(authsvc.port, tls_of(pki, "svcctl"))
    async with ch:
        keys = await admin.ListKeys(pb.ListKeysRequest(account_id=account.id), timeout=10)
        assert list(keys.keys) == []  # the refused CreateKey changed nothing


async def test_unknown_identity_and_product_services(authsvc: AuthServer, pki: pathlib.Path) -> None:
    ch, stranger = auth_stub(authsvc.port, tls_of(pki, "stranger"))
    async with ch:
        request = pb.GetAccountRequest(account_id="acct_x")
        assert await code_of(stranger.GetAccount(request, timeout=10)) == grpc.StatusCode.PERMISSION_DENIED
    ch, product = auth_stub(authsvc.port, tls_of(pki, "product:hotels"))
    async with ch:
        # Allowed through the gate (then refused by authsvc itself: the account does not exist).
        consume = pb.ConsumeSearchRequest(account_id="acct_nope")
        assert await code_of(product.ConsumeSearch(consume, timeout=10)) != grpc.StatusCode.PERMISSION_DENIED
        assert await code_of(product.CreateAccount(create_account(), timeout=10)) == (
            grpc.StatusCode.PERMISSION_DENIED
        )
        # A streaming RPC outside the list is refused before it yields anything.
        watch = product.WatchKeyChanges(pb.WatchKeyChangesRequest(), timeout=10)
        assert await code_of(watch.read()) == grpc.StatusCode.PERMISSION_DENIED


async def test_webhookd_certificate_may_read_accounts_only(authsvc: AuthServer, pki: pathlib.Path) -> None:
    ch, admin = auth_stub(authsvc.port, tls_of(pki, "svcctl"))
    async with ch:
        account = (await admin.CreateAccount(create_account(), timeout=10)).account
    ch, webhookd = auth_stub(authsvc.port, tls_of(pki, "webhookd"))
    async with ch:
        got = await webhookd.GetAccount(pb.GetAccountRequest(account_id=account.id), timeout=10)
        assert got.account.id == account.id
        listing = pb.ListKeysRequest(account_id=account.id)
        assert await code_of(webhookd.ListKeys(listing, timeout=10)) == grpc.StatusCode.PERMISSION_DENIED


async def test_no_certificate_is_refused(authsvc: AuthServer, pki: pathlib.Path) -> None:
    ca = (pki / "ca.pem").read_bytes()
    anonymous = grpc.ssl_channel_credentials(root_certificates=ca)
    async with grpc.aio.secure_channel(
        f"127.0.0.1:{authsvc.port}", anonymous, options=[("grpc.ssl_target_name_override", "authsvc")]
    ) as ch:
        call = auth_pb2_grpc.AuthServiceStub(ch).CreateAccount(create_account(), timeout=5)
        assert await code_of(call) == grpc.StatusCode.UNAVAILABLE
    # Plaintext to a TLS port gets nowhere either.
    ch, plain = auth_stub(authsvc.port, None)
    async with ch:
        assert await code_of(plain.CreateAccount(create_account(), timeout=5)) == grpc.StatusCode.UNAVAILABLE


async def test_another_cas_certificate_is_refused(
    authsvc: AuthServer, pki: pathlib.Path, other_pki: pathlib.Path
) -> None:
    # svcctl's name, but signed by another CA (trusting our CA for the server, so only the client fails).
    _, cert, key = files(other_pki, "svcctl")
    foreign = Tls.from_files(str(pki / "ca.pem"), cert, key)
    ch, stub = auth_stub(authsvc.port, foreign)
    async with ch:
        assert await code_of(stub.CreateAccount(create_account(), timeout=5)) == grpc.StatusCode.UNAVAILABLE


async def test_client_refuses_a_server_that_is_not_the_one_it_expects(
    authsvc: AuthServer, pki: pathlib.Path, other_pki: pathlib.Path
) -> None:
    # authsvc's certificate does not name webhookd: a client looking for webhookd will not talk to it.
    ch, stub = auth_stub(authsvc.port, tls_of(pki, "svcctl"), server="webhookd")
    async with ch:
        assert await code_of(stub.CreateAccount(create_account(), timeout=5)) == grpc.StatusCode.UNAVAILABLE
    # Nor will a client whose CA is another one (the server's chain does not verify).
    ch, stub = auth_stub(authsvc.port, tls_of(other_pki, "svcctl"))
    async with ch:
        assert await code_of(stub.CreateAccount(create_account(), timeout=5)) == grpc.StatusCode.UNAVAILABLE


async def test_webhookd_allow_list(webhookd: Webhookd, pki: pathlib.Path) -> None:
    publish = webhooks_pb2.PublishEventRequest(
        account_id="acct_1",
        environment=webhooks_pb2.ENVIRONMENT_SANDBOX,
        type="apikey.revoked",
        state="revoked",
        data=event_data("apikey.revoked"),
    )
    target = f"127.0.0.1:{webhookd.port}"
    async with channel(target, tls_of(pki, "authsvc"), "webhookd") as ch:
        accepted = await webhooks_pb2_grpc.WebhookServiceStub(ch).PublishEvent(publish, timeout=10)
        assert accepted.event.id.startswith("evt_")
        # authsvc reads endpoints (a certification run's checks) but never changes one.
        assert (
            await code_of(
                webhooks_pb2_grpc.WebhookServiceStub(ch).DeleteEndpoint(
                    webhooks_pb2.DeleteEndpointRequest(
                        account_id="acct_1", environment=webhooks_pb2.ENVIRONMENT_LIVE, endpoint_id="we_x"
                    ),
                    timeout=10,
                )
            )
            == grpc.StatusCode.PERMISSION_DENIED
        )
    async with channel(target, tls_of(pki, "edge"), "webhookd") as ch:
        stub = webhooks_pb2_grpc.WebhookServiceStub(ch)
        # The edge publishes the sandbox's events, never live ones.
        assert (await stub.PublishEvent(publish, timeout=10)).event.id.startswith("evt_")
        live = webhooks_pb2.PublishEventRequest()
        live.CopyFrom(publish)
        live.environment = webhooks_pb2.ENVIRONMENT_LIVE
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.PublishEvent(live, timeout=10)
        assert failed.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "may publish sandbox events only" in (failed.value.details() or "")
        listed = await stub.ListEndpoints(
            webhooks_pb2.ListEndpointsRequest(
                account_id="acct_1", environment=webhooks_pb2.ENVIRONMENT_SANDBOX
            ),
            timeout=10,
        )
        assert list(listed.endpoints) == []


def test_tls_files_that_do_not_fit_are_refused(pki: pathlib.Path, other_pki: pathlib.Path) -> None:
    ca, cert, _ = files(pki, "edge")
    with pytest.raises(TlsError, match=r"--tls-key: .* is not the key of the certificate"):
        Tls.from_files(ca, cert, str(other_pki / f"{stem('svcctl')}.key"))
    with pytest.raises(TlsError, match="--tls-cert: No such file"):
        Tls.from_files(ca, str(pki / "missing.pem"), str(pki / "edge.key"))
    with pytest.raises(TlsError, match="--tls-ca: no PEM certificate"):
        Tls.from_files(str(pki / "edge.key"), cert, str(pki / "edge.key"))
    assert tls_of(pki, "product:hotels").identity == "product:hotels"


def test_a_service_without_tls_files_or_insecure_dev_does_not_start(tmp_path: pathlib.Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "authsvc", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "",
         "--database", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}", "--tls-ca", str(tmp_path / "none.pem")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode != 0
    assert "--tls-ca: No such file or directory" in run.stderr
    assert "--insecure-dev" in run.stderr


def test_svcctl_certs_init_makes_a_ca_and_a_certificate_per_identity(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from svcctl.__main__ import main

    directory = tmp_path / "tls"
    assert main(["certs", "init", "--dir", str(directory), "--identity", "product:hotels"]) == 0
    for identity in ("authsvc", "webhookd", "edge", "svcctl", "portal", "product:hotels"):
        tls = Tls.from_files(*files(directory, identity))
        assert tls.identity == identity
        assert (directory / f"{stem(identity)}.key").stat().st_mode & 0o077 == 0
    assert (directory / "ca.key").stat().st_mode & 0o077 == 0
    before = (directory / "edge.pem").read_bytes()
    capsys.readouterr()
    assert main(["certs", "init", "--dir", str(directory)]) == 0
    assert "nothing written" in capsys.readouterr().out
    assert (directory / "edge.pem").read_bytes() == before


def test_webhookd_without_a_secrets_key_starts_only_as_an_insecure_dev_run(
    pki: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signing secrets are never stored in the clear by a production run: no key, no start."""
    from svckit.secretbox import new_key
    from webhookd._server import build_parser, config_from_args

    monkeypatch.delenv("WEBHOOKD_SECRETS_KEY", raising=False)
    monkeypatch.delenv("WEBHOOKD_SECRETS_KEY_FILE", raising=False)
    monkeypatch.delenv("WEBHOOKD_INSECURE_DEV", raising=False)
    base = ["serve", "--database", f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", *tls_args(pki, "webhookd")]
    with pytest.raises(SystemExit, match="--secrets-key-file"):
        config_from_args(build_parser().parse_args(base))
    key_file = tmp_path / "secrets.key"
    key_file.write_text(new_key())
    sealed = config_from_args(build_parser().parse_args([*base, "--secrets-key-file", str(key_file)]))
    assert sealed.secrets_key is not None
    dev = ["serve", "--database", f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", "--insecure-dev"]
    assert config_from_args(build_parser().parse_args(dev)).secrets_key is None

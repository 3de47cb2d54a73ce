"""The backup runbook (docs/operations.md "Backups and restore") run for real: authsvc, webhookd and the
edge as processes on a PostgreSQL schema, ``pg_dump --format=custom`` while they run, every process stopped,
``pg_restore --clean --if-exists`` and the same release started again with the same sealing keys. Nothing
from before the dump is lost or delivered twice, what came after it is gone, the dump holds no secret."""

from __future__ import annotations

import asyncio
import collections
import pathlib
import re
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator, Sequence

import asyncpg
import grpc
import httpx
import pytest
import trustme
from google.protobuf import duration_pb2

from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from svckit.secretbox import write_new_key
from svckit.signing import verify
from tests.conftest import PG_DB, PG_HOST, PG_PORT
from tests.support import ServiceProcess, event_data, start_service
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd.testing import Received, Receiver, trusted_receiver

ACTOR = apb.Actor(user="ops@example.test")
LIVE, SANDBOX = wpb.ENVIRONMENT_LIVE, wpb.ENVIRONMENT_SANDBOX
DSN = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{PG_DB}"
BEFORE, AFTER = 20, 5  # events published before the dump, and after it
EVENT_ID = "x-service-event-id"
CLIENT_SECRET = "cs_backup-" + "V8" * 12  # a receiver's OAuth2 client secret: sealed, never in the dump


def _major(tool: str) -> int:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"\) (\d+)", out)
    assert found, out
    return int(found.group(1))


@pytest.fixture
async def pg_tools(pg_url: str) -> None:
    """pg_dump and pg_restore on PATH, pg_dump's major version at least the server's (else it refuses)."""
    missing = [t for t in ("pg_dump", "pg_restore") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed")
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB)
    try:
        server = conn.get_server_version().major
    finally:
        await conn.close()
    if (dump := await asyncio.to_thread(_major, "pg_dump")) < server:
        pytest.skip(f"pg_dump {dump} is older than the PostgreSQL server ({server})")


@pytest.fixture
def receiver(tmp_path: pathlib.Path) -> Iterator[tuple[Receiver, pathlib.Path]]:
    r, ca_file = trusted_receiver(tmp_path)
    yield r, ca_file
    r.stop()


class Stack:
    """webhookd, authsvc (its outbox publishing to that webhookd) and the edge on one schema, plaintext
    gRPC, each with its sealing key ``<service>.key`` and its log in ``work``."""

    def __init__(self, database: str, ca_file: pathlib.Path, work: pathlib.Path) -> None:
        self.procs: list[ServiceProcess] = []
        try:
            self.webhookd = self._add(
                start_service(
                    "webhookd", work, database,
                    "--allow-private-targets", "--ca-bundle", str(ca_file), "--poll-seconds", "0.1",
                    "--secrets-key-file", str(work / "webhookd.key"),
                )
            )  # fmt: skip
            self.authsvc = self._add(
                start_service(
                    "authsvc", work, database, "--webhookd", self.webhookd.grpc_target,
                    "--secrets-key-file", str(work / "authsvc.key"),
                )
            )  # fmt: skip
            args = edge_args(
                self.authsvc.grpc_target, self.webhookd.grpc_target, database, None,
                "--idempotency-key-file", str(work / "edge.key"),
            )  # fmt: skip
            self.edge = self._add(ServiceProcess("edge", args).start(work / "edge.log"))
        except BaseException:
            self.stop()
            raise

    def _add(self, proc: ServiceProcess) -> ServiceProcess:
        self.procs.append(proc)
        return proc

    def url(self, listener: str) -> str:
        return f"http://127.0.0.1:{self.edge.ports[f'{listener}_port']}"

    def stop(self) -> None:
        codes = {p.module: p.terminate() for p in reversed(self.procs)}
        assert set(codes.values()) <= {0}, (codes, [p.logs()[-2000:] for p in self.procs])


async def _publish(
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    account: str,
    tag: str,
    n: int,
    environment: wpb.Environment.ValueType = LIVE,
) -> list[str]:
    ids = []
    for i in range(n):
        resp = await hooks.PublishEvent(
            wpb.PublishEventRequest(
                account_id=account,
                environment=environment,
                type="booking.confirmed",
                state="confirmed",
                data=event_data("booking.confirmed"),
                idempotency_key=f"{tag}-{i}",
            )
        )
        ids.append(resp.event.id)
    return ids


async def _arrived(receiver: Receiver, wanted: Sequence[str], within: float = 60.0) -> None:
    """Poll until every event of ``wanted`` reached the receiver."""
    deadline = asyncio.get_running_loop().time() + within
    while not set(wanted) <= {r.headers.get(EVENT_ID, "") for r in receiver.received()}:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not all of {len(wanted)} events arrived")
        await asyncio.sleep(0.05)


async def _decision(auth: auth_pb2_grpc.AuthServiceStub, secret: str) -> apb.Decision.ValueType:
    resp: apb.AuthorizeResponse = await auth.Authorize(
        apb.AuthorizeRequest(
            api_key=secret,
            environment=apb.ENVIRONMENT_LIVE,
            required_scope="account:read",
            source_address="192.0.2.1",
        )
    )
    return resp.decision


def _blocking_run(*command: str) -> bytes:
    done = subprocess.run(command, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


async def _run(*command: str) -> bytes:
    """Run a PostgreSQL client tool (off the event loop: the services' clients keep running); its stdout."""
    return await asyncio.to_thread(_blocking_run, *command)


def _schema_of(url: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["search_path"][0]


async def _delivery(hooks: webhooks_pb2_grpc.WebhookServiceStub, account: str, event_id: str) -> wpb.Delivery:
    resp: wpb.ListDeliveriesResponse = await hooks.ListDeliveries(
        wpb.ListDeliveriesRequest(account_id=account, environment=SANDBOX, event_id=event_id)
    )
    (delivery,) = resp.deliveries
    return delivery


async def _settled(
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    account: str,
    event_id: str,
    attempts: int,
    within: float = 30.0,
) -> wpb.Delivery:
    """Poll until the sandbox delivery of ``event_id`` has ``attempts`` attempts recorded (none running)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        delivery = await _delivery(hooks, account, event_id)
        if delivery.attempt_count == attempts:
            return delivery
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{event_id}: {delivery.attempt_count} attempts, expected {attempts}")
        await asyncio.sleep(0.05)


async def _advance_a_minute(hooks: webhooks_pb2_grpc.WebhookServiceStub, account: str) -> None:
    await hooks.AdvanceSandboxClock(
        wpb.AdvanceSandboxClockRequest(
            account_id=account, environment=SANDBOX, by=duration_pb2.Duration(seconds=60)
        )
    )


async def test_a_restored_dump_loses_nothing_and_sends_nothing_twice(
    pg_url: str, pg_tools: None, receiver: tuple[Receiver, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    hook_receiver, ca_file = receiver
    # The sandbox endpoint's first delivery fails (503): its retry is still waiting when the dump is taken.
    flaky: list[Received] = []

    def answer(request: Received) -> int:
        if request.path != "/flaky":
            return 200
        flaky.append(request)
        return 503 if len(flaky) == 1 else 200

    hook_receiver.responder = answer
    schema = _schema_of(pg_url)
    for name in ("webhookd", "authsvc", "edge"):
        write_new_key(tmp_path / f"{name}.key")
    dump = tmp_path / "travel.dump"
    sample = {"type": "booking.cancelled"}  # a sandbox event no endpoint subscribes to

    # Before the dump: an account, keys (one revoked), endpoints, BEFORE events all delivered, one sandbox
    # delivery waiting for its retry, one sample event through the edge with an Idempotency-Key.
    stack = Stack(pg_url, ca_file, tmp_path)
    try:
        async with (
            grpc.aio.insecure_channel(stack.authsvc.grpc_target) as ac,
            grpc.aio.insecure_channel(stack.webhookd.grpc_target) as wc,
            httpx.AsyncClient() as http,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(ac)
            hooks = webhooks_pb2_grpc.WebhookServiceStub(wc)
            account = (
                await auth.CreateAccount(
                    apb.CreateAccountRequest(name="Restore Partner", mode=apb.ACCOUNT_MODE_A, actor=ACTOR)
                )
            ).account
            keys = [
                await auth.CreateKey(
                    apb.CreateKeyRequest(
                        account_id=account.id,
                        environment=apb.ENVIRONMENT_LIVE,
                        name=f"k{i}",
                        scopes=["account:read"],
                        actor=ACTOR,
                    )
                )
                for i in range(4)
            ]
            kept, revoked, revoked_later = keys[:2], keys[2], keys[3]
            await auth.RevokeKey(apb.RevokeKeyRequest(key_id=revoked.key.id, reason="test", actor=ACTOR))
            sandbox_key = await auth.CreateKey(
                apb.CreateKeyRequest(
                    account_id=account.id,
                    environment=apb.ENVIRONMENT_SANDBOX,
                    name="sandbox",
                    scopes=["webhooks:write"],
                    actor=ACTOR,
                )
            )
            endpoint = await hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=account.id,
                    environment=LIVE,
                    url=hook_receiver.url(),
                    events=["booking.confirmed"],
                )
            )
            secret = endpoint.signing_secret
            sandbox_endpoint = await hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=account.id,
                    environment=SANDBOX,
                    url=hook_receiver.url("/flaky"),
                    events=["booking.confirmed"],
                )
            )
            # A receiver that authenticates us: its OAuth2 client secret and client certificate key are
            # sealed too (no event of this kind is published: they are only stored).
            client_cert = trustme.CA().issue_cert("partner.example")
            client_key = client_cert.private_key_pem.bytes().decode()
            await hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=account.id,
                    environment=LIVE,
                    url=hook_receiver.url("/authenticating"),
                    events=["booking.cancelled"],
                    receiver_auth=wpb.ReceiverAuth(
                        client_certificate=wpb.ClientCertificate(
                            certificate_pem=client_cert.cert_chain_pems[0].bytes().decode(),
                            private_key_pem=client_key,
                        ),
                        oauth2=wpb.OAuth2ClientCredentials(
                            token_url=hook_receiver.url("/token"),
                            client_id="cid",
                            client_secret=CLIENT_SECRET,
                        ),
                    ),
                )
            )
            before = await _publish(hooks, account.id, "before", BEFORE)
            (retried,) = await _publish(hooks, account.id, "retried", 1, SANDBOX)
            await _arrived(hook_receiver, before)
            waiting = await _settled(hooks, account.id, retried, attempts=1)
            assert waiting.status == wpb.DELIVERY_STATUS_PENDING
            sample_headers = {
                "Host": SANDBOX_HOST,
                "Authorization": f"Svc {sandbox_key.secret}",
                "Idempotency-Key": "sample-before-the-dump",
            }
            made = await http.post(
                f"{stack.url('sandbox')}/v1/sandbox/events", headers=sample_headers, json=sample
            )
            assert made.status_code == 202, made.text

            # The dump, taken while everything runs.
            await _run("pg_dump", "--format=custom", f"--schema={schema}", f"--file={dump}", DSN)

            # After the dump: more events (delivered), the waiting retry delivered, a revocation; the
            # restore undoes all of them.
            after = await _publish(hooks, account.id, "after", AFTER)
            await _arrived(hook_receiver, after)
            await _advance_a_minute(hooks, account.id)
            assert (await _settled(hooks, account.id, retried, 2)).status == wpb.DELIVERY_STATUS_SUCCEEDED
            await auth.RevokeKey(
                apb.RevokeKeyRequest(key_id=revoked_later.key.id, reason="test", actor=ACTOR)
            )
            assert await _decision(auth, revoked_later.secret) == apb.DECISION_DENY
    finally:
        stack.stop()
    received_before_restore = len(hook_receiver.received())
    assert len(flaky) == 2

    await _run("pg_restore", "--clean", "--if-exists", f"--schema={schema}", f"--dbname={DSN}", str(dump))

    stack = Stack(pg_url, ca_file, tmp_path)
    try:
        async with (
            grpc.aio.insecure_channel(stack.authsvc.grpc_target) as ac,
            grpc.aio.insecure_channel(stack.webhookd.grpc_target) as wc,
            httpx.AsyncClient() as http,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(ac)
            hooks = webhooks_pb2_grpc.WebhookServiceStub(wc)
            # Keys as they were at the dump: the one revoked after it is active again, as documented.
            for key in (*kept, revoked_later):
                assert await _decision(auth, key.secret) == apb.DECISION_ALLOW, key.key.id
            assert await _decision(auth, revoked.secret) == apb.DECISION_DENY
            for key, status in ((kept[0], 200), (revoked, 401)):
                got = await http.get(
                    f"{stack.url('live')}/v1/account",
                    headers={"Host": LIVE_HOST, "Authorization": f"Svc {key.secret}"},
                )
                assert got.status_code == status, got.text
            # The edge's stored answer (sealed with its key) is still there: the same event comes back.
            again = await http.post(
                f"{stack.url('sandbox')}/v1/sandbox/events", headers=sample_headers, json=sample
            )
            assert again.status_code == 202 and again.json() == made.json()

            listed = await hooks.ListEvents(
                wpb.ListEventsRequest(
                    account_id=account.id, environment=LIVE, types=["booking.confirmed"], page_size=100
                )
            )
            assert {e.id for e in listed.events} == set(before)  # the ones after the dump are gone
            for event_id in after:
                with pytest.raises(grpc.aio.AioRpcError) as gone:
                    await hooks.GetEvent(
                        wpb.GetEventRequest(account_id=account.id, environment=LIVE, event_id=event_id)
                    )
                assert gone.value.code() == grpc.StatusCode.NOT_FOUND
            # Every delivery made before the dump is recorded as made: none is due again.
            deliveries = await hooks.ListDeliveries(
                wpb.ListDeliveriesRequest(
                    account_id=account.id, environment=LIVE, endpoint_id=endpoint.endpoint.id, page_size=100
                )
            )
            made_before = {d.event_id: (d.status, d.attempt_count) for d in deliveries.deliveries}
            assert made_before == {e: (wpb.DELIVERY_STATUS_SUCCEEDED, 1) for e in before}
            # The delivery made after the dump is waiting again, and is sent again.
            assert (await _delivery(hooks, account.id, retried)).attempt_count == 1
            await _advance_a_minute(hooks, account.id)
            assert (await _settled(hooks, account.id, retried, 2)).status == wpb.DELIVERY_STATUS_SUCCEEDED

            # A new event arriving means the worker ran: anything due again would have come before it.
            (fresh,) = await _publish(hooks, account.id, "fresh", 1)
            await _arrived(hook_receiver, [fresh])
    finally:
        stack.stop()

    received = hook_receiver.received()
    counts = collections.Counter(r.headers[EVENT_ID] for r in received)
    assert counts.pop(retried) == 3  # failed, delivered after the dump, delivered again after the restore
    assert {e: c for e, c in counts.items() if c > 1} == {}
    assert set(counts) == {*before, *after, fresh}
    new_deliveries = {r.headers[EVENT_ID]: r for r in received[received_before_restore:]}
    assert set(new_deliveries) == {retried, fresh}
    # The endpoints' signing secrets, given at registration before the dump, still sign.
    for event_id, signing_secret in ((fresh, secret), (retried, sandbox_endpoint.signing_secret)):
        delivery = new_deliveries[event_id]
        verify(delivery.body, delivery.headers["x-service-signature"], signing_secret, delivery.at)

    # No secret in the dump: neither in its bytes nor in the SQL it restores (custom format compresses).
    sql = await _run("pg_restore", "--file=-", str(dump))
    assert account.id.encode() in sql and kept[0].key.id.encode() in sql  # the text is readable
    sealing_keys = [(tmp_path / f"{n}.key").read_text().strip() for n in ("webhookd", "authsvc", "edge")]
    secrets = [secret, sandbox_endpoint.signing_secret, sandbox_key.secret, *(k.secret for k in keys)]
    secrets += [CLIENT_SECRET, client_key.splitlines()[1]]
    for text in (*secrets, *sealing_keys):
        assert text.encode() not in dump.read_bytes() and text.encode() not in sql

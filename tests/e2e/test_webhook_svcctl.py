"""Every webhookd admin operation through svcctl, against webhookd running as a real process."""

from __future__ import annotations

import argparse
import json
import pathlib
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trustme

from svcctl.__main__ import main as svcctl
from svckit import catalog
from tests.support import ServiceProcess
from webhookd.testing import Receiver


@pytest.fixture
def stack(tmp_path: pathlib.Path) -> Iterator[tuple[ServiceProcess, Receiver]]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    receiver = Receiver(ctx).start()
    proc = ServiceProcess(
        "webhookd",
        [
            "--listen", "127.0.0.1:0", "--metrics-listen", "", "--allow-private-targets",
            "--database", f"sqlite+aiosqlite:///{tmp_path / 'wh.db'}",
            "--ca-bundle", str(tmp_path / "ca.pem"),
        ],
    ).start(tmp_path / "webhookd.log")  # fmt: skip
    yield proc, receiver
    proc.terminate()
    receiver.stop()


def run(capsys: pytest.CaptureFixture[str], target: str, *argv: str, code: int = 0) -> Any:
    rc = svcctl(["--webhookd", target, "--insecure-dev", "webhooks", *argv])
    out, err = capsys.readouterr()
    assert rc == code, (out, err)
    if code:
        return err
    lines = out.strip().splitlines()
    if argv[0] == "stream":
        return [json.loads(line) for line in lines]
    return json.loads(out) if out.strip() else None


def test_every_admin_operation(
    stack: tuple[ServiceProcess, Receiver], capsys: pytest.CaptureFixture[str]
) -> None:
    proc, receiver = stack
    t = proc.grpc_target
    scope = ["--account", "acct_cli", "--environment", "live"]
    reg = run(capsys, t, "register", *scope, "--url", receiver.url(), "--event", "booking.confirmed")
    ep = reg["endpoint"]["id"]
    assert reg["signing_secret"].startswith("whsec_")
    err = run(
        capsys, t, "register", *scope, "--url", "http://example.com/", "--event", "booking.confirmed", code=1
    )
    assert "invalid_request" in err and "url" in err
    assert run(capsys, t, "get", *scope, ep)["endpoint"]["url"] == receiver.url()
    assert [e["id"] for e in run(capsys, t, "list", *scope)["endpoints"]] == [ep]
    upd = run(capsys, t, "update", *scope, ep, "--event", "booking.confirmed", "--event", "booking.failed")
    assert upd["endpoint"]["events"] == ["booking.confirmed", "booking.failed"]
    rot = run(capsys, t, "rotate-secret", *scope, ep, "--overlap", "1h")
    assert rot["signing_secret"] != reg["signing_secret"] and "previous_secret_expires_at" in rot["endpoint"]
    pub = run(capsys, t, "publish", *scope, "--type", "booking.failed", "--data", example("booking.failed"))
    evt = pub["event"]["id"]
    assert pub["delivery_count"] == 1
    test = run(capsys, t, "send-test", *scope, ep)
    assert test["event"]["type"] == "webhook.test"
    deadline = time.monotonic() + 10
    while receiver.count < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert receiver.count == 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        atts = run(capsys, t, "attempts", *scope, "--event-id", evt).get("attempts", [])
        if atts:
            break
        time.sleep(0.05)
    assert atts[0]["outcome"] == "ATTEMPT_OUTCOME_SUCCEEDED"
    assert atts[0]["response_headers"]["content-type"].startswith("text/plain")
    dels = run(capsys, t, "deliveries", *scope, "--endpoint", ep, "--since", "1h")["deliveries"]
    assert {d["event_id"] for d in dels} == {evt, test["event"]["id"]}
    tests = run(capsys, t, "deliveries", *scope, "--event-type", "webhook.test")["deliveries"]
    assert [d["event_id"] for d in tests] == [test["event"]["id"]]
    resent = run(capsys, t, "resend", *scope, atts[0]["id"])
    assert resent["delivery"]["attempt_count"] == 2
    assert run(capsys, t, "enable", *scope, ep)["endpoint"]["status"] == "ENDPOINT_STATUS_ENABLED"
    assert run(capsys, t, "recover", *scope, ep, "--since", "1d") == {"recovered_count": 0}
    later = run(
        capsys,
        t,
        "publish",
        *scope,
        "--type",
        "apikey.revoked",
        "--state",
        "revoked",
        "--data",
        example("apikey.revoked"),
    )["event"]["id"]
    events = run(capsys, t, "stream", *scope, "--limit", "1", "--since-event", evt)
    assert [e["id"] for e in events] == [later]
    run(capsys, t, "delete", *scope, ep)
    assert "not_found" in run(capsys, t, "get", *scope, ep, code=1)


def example(kind: str, **fields: str) -> str:
    """``--data`` of a valid event of ``kind`` (the catalog's example, ``fields`` over it)."""
    return json.dumps({**catalog.example(kind), **fields})


def test_events_list_and_get(
    stack: tuple[ServiceProcess, Receiver], capsys: pytest.CaptureFixture[str]
) -> None:
    proc, _ = stack
    t = proc.grpc_target
    scope = ["--account", "acct_evts", "--environment", "sandbox"]
    published = [
        run(capsys, t, "publish", *scope, "--type", kind, "--data", example(kind, customerRef=f"cust-{n}"))[
            "event"
        ]
        for n, kind in enumerate(["booking.confirmed", "booking.failed", "booking.confirmed"])
    ]
    ids = [e["id"] for e in published]
    listed = run(capsys, t, "events", "list", *scope)
    assert [e["id"] for e in listed["events"]] == ids[::-1]  # newest first
    assert "next_page_token" not in listed
    kind = run(capsys, t, "events", "list", *scope, "--type", "booking.failed", "--since", "1h")
    assert [e["id"] for e in kind["events"]] == [ids[1]]
    assert run(capsys, t, "events", "list", *scope, "--until", "1h") == {}
    first = run(capsys, t, "events", "list", *scope, "--limit", "2")
    assert [e["id"] for e in first["events"]] == ids[:0:-1]
    rest = run(capsys, t, "events", "list", *scope, "--limit", "2", "--page-token", first["next_page_token"])
    assert [e["id"] for e in rest["events"]] == ids[:1]
    # Another environment of the same account sees none of them.
    assert run(capsys, t, "events", "list", "--account", "acct_evts", "--environment", "live") == {}
    got = run(capsys, t, "events", "get", *scope, ids[1])["event"]
    assert got["type"] == "booking.failed" and got["data"]["customerRef"] == "cust-1"
    assert json.loads(got["envelope_json"])["id"] == ids[1]
    assert "not_found" in run(
        capsys, t, "events", "get", "--account", "acct_other", "--environment", "sandbox", ids[1], code=1
    )
    assert "invalid_request" in run(capsys, t, "events", "list", *scope, "--type", "no.such", code=1)


def test_schemes_signing_keys_and_reconciliation(
    stack: tuple[ServiceProcess, Receiver], capsys: pytest.CaptureFixture[str]
) -> None:
    """--signature-scheme on register and update, signing-keys, and after a 410 disabled the endpoint:
    events --undelivered-to, recover --dry-run (a count, nothing changed), then the real recovery."""
    proc, receiver = stack
    t = proc.grpc_target
    scope = ["--account", "acct_rec", "--env", "sandbox"]
    reg = run(
        capsys, t, "register", *scope, "--url", receiver.url("/gone"), "--event", "booking.confirmed",
        "--signature-scheme", "standard",
    )  # fmt: skip
    ep = reg["endpoint"]["id"]
    assert reg["endpoint"]["signature_scheme"] == "SIGNATURE_SCHEME_STANDARD"
    keys = run(capsys, t, "signing-keys", *scope, "--endpoint", ep)["keys"]
    assert [k["endpoint_id"] for k in keys] == [ep] and keys[0]["public_key"].startswith("whpk_")
    assert run(capsys, t, "signing-keys", *scope)["keys"] == keys
    assert run(capsys, t, "signing-keys", "--account", "acct_other", "--env", "sandbox") == {}
    upd = run(capsys, t, "update", *scope, ep, "--signature-scheme", "both")
    assert upd["endpoint"]["signature_scheme"] == "SIGNATURE_SCHEME_BOTH"
    assert upd["endpoint"]["events"] == ["booking.confirmed"]  # the rest as it was
    assert reg["endpoint"]["ordering"] == "DELIVERY_ORDER_UNORDERED"  # the default, shown
    upd = run(capsys, t, "update", *scope, ep, "--ordering", "perResource")
    assert upd["endpoint"]["ordering"] == "DELIVERY_ORDER_PER_RESOURCE"
    assert upd["endpoint"]["signature_scheme"] == "SIGNATURE_SCHEME_BOTH"  # the rest as it was
    upd = run(capsys, t, "update", *scope, ep, "--ordering", "none")
    assert upd["endpoint"]["ordering"] == "DELIVERY_ORDER_UNORDERED"
    with pytest.raises((SystemExit, argparse.ArgumentError)):  # refused before any call
        svcctl(["--webhookd", t, "webhooks", "update", *scope, ep, "--ordering", "fifo"])
    with pytest.raises((SystemExit, argparse.ArgumentError)):  # refused before any call
        svcctl(["--webhookd", t, "webhooks", "update", *scope, ep, "--signature-scheme", "rot13"])

    # A 410 disables the endpoint: the first event fails, the next is held.
    receiver.responder = lambda r: 410 if r.path == "/gone" else 200
    first = run(
        capsys, t, "publish", *scope, "--type", "booking.confirmed", "--data", example("booking.confirmed")
    )["event"]["id"]
    deadline = time.monotonic() + 10
    while run(capsys, t, "get", *scope, ep)["endpoint"]["status"] != "ENDPOINT_STATUS_DISABLED":
        assert time.monotonic() < deadline, "the 410 did not disable the endpoint"
        time.sleep(0.05)
    second = run(
        capsys, t, "publish", *scope, "--type", "booking.confirmed", "--data", example("booking.confirmed")
    )["event"]["id"]
    missed = run(capsys, t, "events", "list", *scope, "--undelivered-to", ep)["events"]
    assert [e["id"] for e in missed] == [second, first]
    statuses = {d["event_id"]: d["status"] for d in run(capsys, t, "deliveries", *scope)["deliveries"]}

    dry = run(capsys, t, "recover", *scope, ep, "--since", "1h", "--dry-run")
    assert dry == {"recovered_count": 2, "dry_run": True}
    after = {d["event_id"]: d["status"] for d in run(capsys, t, "deliveries", *scope)["deliveries"]}
    assert after == statuses == {
        first: "DELIVERY_STATUS_FAILED", second: "DELIVERY_STATUS_HELD"
    }  # fmt: skip

    receiver.responder = lambda _r: 200
    run(capsys, t, "enable", *scope, ep)
    assert run(capsys, t, "recover", *scope, ep, "--since", "1h") == {"recovered_count": 2}
    deadline = time.monotonic() + 10
    while run(capsys, t, "events", "list", *scope, "--undelivered-to", ep) != {}:
        assert time.monotonic() < deadline, "the recovered events were not delivered"
        time.sleep(0.05)


def test_filter_and_payload(
    stack: tuple[ServiceProcess, Receiver], capsys: pytest.CaptureFixture[str]
) -> None:
    """An endpoint's content filter and payload mode through svcctl: set, refused naming the operator's
    path, shown, removed."""
    proc, receiver = stack
    t = proc.grpc_target
    scope = ["--account", "acct_cli_f", "--environment", "live"]
    flt = '{"data": {"product": {"$in": ["hotels"]}}}'
    err = run(
        capsys, t, "register", *scope, "--url", receiver.url(), "--event", "booking.confirmed",
        "--filter", '{"data": {"product": {"$like": "h"}}}', code=1,
    )  # fmt: skip
    assert "invalid_request" in err and "filter.data.product.$like" in err
    assert run(capsys, t, "list", *scope).get("endpoints", []) == []
    reg = run(
        capsys, t, "register", *scope, "--url", receiver.url(), "--event", "booking.confirmed",
        "--filter", flt, "--payload", "thin",
    )  # fmt: skip
    ep = reg["endpoint"]["id"]
    assert json.loads(reg["endpoint"]["filter_json"]) == json.loads(flt)
    assert reg["endpoint"]["payload"] == "PAYLOAD_MODE_THIN"
    hotel = run(
        capsys, t, "publish", *scope, "--type", "booking.confirmed", "--data", example("booking.confirmed")
    )
    assert hotel["delivery_count"] == 1
    flights = json.dumps({**catalog.example("booking.confirmed"), "product": "flights"})
    assert (
        run(capsys, t, "publish", *scope, "--type", "booking.confirmed", "--data", flights).get(
            "delivery_count", 0
        )
        == 0
    )
    upd = run(capsys, t, "update", *scope, ep, "--filter", "", "--payload", "full")
    assert "filter_json" not in upd["endpoint"] and upd["endpoint"]["payload"] == "PAYLOAD_MODE_FULL"


def test_broker_destinations_with_their_password_from_a_file(
    stack: tuple[ServiceProcess, Receiver], capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """``--type amqp`` with the ``--amqp-*`` flags, the password read from a file and never printed; an
    update of the routing key keeps it; ``--type nats`` moves the endpoint to a JetStream subject."""
    proc, _receiver = stack
    t = proc.grpc_target
    scope = ["--account", "acct_cli_dest", "--environment", "live"]
    secret_file = tmp_path / "amqp.pw"
    secret_file.write_text("svcctl-amqp-pw\n")
    amqp = ["--amqp-url", "amqp://svc@127.0.0.1:5672/%2F", "--amqp-exchange", "partner.events"]
    reg = run(capsys, t, "register", *scope, "--event", "booking.confirmed", "--type", "amqp", *amqp,
              "--amqp-routing-key", "bk", "--amqp-password-file", str(secret_file))  # fmt: skip
    ep = reg["endpoint"]
    assert ep["type"] == "DESTINATION_TYPE_AMQP" and ep["amqp"]["password_set"] is True
    assert "svcctl-amqp-pw" not in json.dumps(reg)
    upd = run(capsys, t, "update", *scope, ep["id"], *amqp, "--amqp-routing-key", "bk2")
    assert upd["endpoint"]["amqp"]["routing_key"] == "bk2" and upd["endpoint"]["amqp"]["password_set"] is True
    nats = run(capsys, t, "update", *scope, ep["id"], "--type", "nats", "--nats-server", "nats://127.0.0.1:4222",
               "--nats-subject", "partner.bookings")  # fmt: skip
    assert nats["endpoint"]["type"] == "DESTINATION_TYPE_NATS" and "amqp" not in nats["endpoint"]
    err = run(capsys, t, "register", *scope, "--event", "booking.confirmed", "--type", "nats", code=1)
    assert "invalid_request" in err and "nats" in err
    assert "svcctl-amqp-pw" not in proc.logs()


def test_receiver_auth(
    stack: tuple[ServiceProcess, Receiver], capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """svcctl sets an endpoint's receiver authentication, the secret from a file; what comes back has no
    secret; a header of ours is refused; --none removes it."""
    proc, receiver = stack
    t = proc.grpc_target
    scope = ["--account", "acct_cli", "--environment", "live"]
    ep = run(capsys, t, "register", *scope, "--url", receiver.url(), "--event", "booking.confirmed")[
        "endpoint"
    ]["id"]
    (tmp_path / "secret").write_text("cs_from-a-file-0123456789\n")
    cert = trustme.CA().issue_cert("partner.example")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "c.key"))
    oauth = ["--oauth2-token-url", receiver.url("/token"), "--oauth2-client-id", "cid"]
    got = run(
        capsys, t, "receiver-auth", *scope, ep, "--header", "X-Tenant: t1", *oauth,
        "--oauth2-client-secret-file", str(tmp_path / "secret"),
        "--client-cert", str(tmp_path / "c.pem"), "--client-key", str(tmp_path / "c.key"),
    )["endpoint"]["receiver_auth"]  # fmt: skip
    assert got["headers"] == {"X-Tenant": "t1"} and got["oauth2"]["client_id"] == "cid"
    assert "client_secret" not in got["oauth2"] and "private_key_pem" not in got["client_certificate"]
    sha = got["client_certificate"]["sha256_fingerprint"]
    kept = run(capsys, t, "receiver-auth", *scope, ep, *oauth, "--client-cert-sha256", sha)["endpoint"]
    assert kept["receiver_auth"]["client_certificate"]["sha256_fingerprint"] == sha
    err = run(capsys, t, "receiver-auth", *scope, ep, "--header", "Content-Type: x", code=1)
    assert "invalid_request" in err and "Content-Type" in err
    assert "receiver_auth" not in run(capsys, t, "receiver-auth", *scope, ep, "--none")["endpoint"]

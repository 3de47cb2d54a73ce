#!/usr/bin/env python3
"""Benchmark of the portal (not a test), loopback only, bounded (about a minute on this machine).

authsvc, webhookd and the portal run as processes on SQLite in a temporary directory. The sandbox of
one account gets 60 keys and 10,000 delivery attempts (events published over gRPC and delivered to a
local plain-HTTP receiver), then one signed-in client fetches each page sequentially for a fixed time
and prints pages/s and the server-side p50/p99 (the portal's own ``portal_request_seconds`` histogram
is coarser; here the client's time is measured, which includes the loopback HTTP round trip).

Usage: ``.venv/bin/python scripts/bench_portal.py [--attempts 10000] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PASSWORD = "benchmark passphrase"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    import grpc
    import httpx

    from tests.support import ServiceProcess, event_data, sqlite_url, start_service
    from travel.auth.v1 import auth_pb2 as apb
    from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
    from travel.auth.v1 import identity_pb2 as ipb
    from travel.webhooks.v1 import webhooks_pb2 as wpb
    from travel.webhooks.v1 import webhooks_pb2_grpc
    from webhookd.testing import Receiver

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_portal_"))
    receiver = Receiver(None, record=False).start()
    procs: list[ServiceProcess] = []
    try:
        webhookd = start_service(
            "webhookd",
            tmp,
            sqlite_url(tmp, "w.db"),
            "--allow-private-targets",
            "--allow-http",
            "--poll-seconds",
            "0.05",
        )
        procs.append(webhookd)
        authsvc = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(authsvc)
        portal = ServiceProcess(
            "portal",
            [
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "",
                "--log-level",
                "WARNING",
                "--authsvc",
                authsvc.grpc_target,
                "--webhookd",
                webhookd.grpc_target,
            ],
        ).start(tmp / "portal.log")
        procs.append(portal)

        with (
            grpc.insecure_channel(authsvc.grpc_target) as a,
            grpc.insecure_channel(webhookd.grpc_target) as w,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(a)
            ids = identity_pb2_grpc.IdentityServiceStub(a)
            hooks = webhooks_pb2_grpc.WebhookServiceStub(w)
            ops = apb.Actor(user="ops:bench")
            account = auth.CreateAccount(apb.CreateAccountRequest(name="Bench", actor=ops)).account.id
            invite = ids.CreateInvite(
                ipb.CreateInviteRequest(
                    account_id=account, email="o@bench.example", role=ipb.USER_ROLE_OWNER, actor=ops
                )
            )
            session = ids.AcceptInvite(
                ipb.AcceptInviteRequest(token=invite.token, password=PASSWORD)
            ).session_token
            for i in range(args.keys):
                auth.CreateKey(
                    apb.CreateKeyRequest(
                        account_id=account,
                        environment=apb.ENVIRONMENT_SANDBOX,
                        name=f"key {i}",
                        scopes=["hotels:read"],
                        actor=ops,
                    )
                )
            hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=account,
                    environment=wpb.ENVIRONMENT_SANDBOX,
                    url=f"http://127.0.0.1:{receiver.port}/h",
                    events=["booking.confirmed"],
                )
            )
            started = time.monotonic()
            for _ in range(args.attempts):
                hooks.PublishEvent(
                    wpb.PublishEventRequest(
                        account_id=account,
                        environment=wpb.ENVIRONMENT_SANDBOX,
                        type="booking.confirmed",
                        state="confirmed",
                        data=event_data("booking.confirmed"),
                    )
                )
            while receiver.answered < args.attempts:
                if time.monotonic() - started > 600:
                    raise SystemExit(f"only {receiver.answered} of {args.attempts} attempts after 10 min")
                time.sleep(0.2)
            print(
                f"seeded {args.keys} keys and {receiver.answered} attempts "
                f"in {time.monotonic() - started:.1f} s"
            )

        base = portal.ports["url"]
        rows = []
        with httpx.Client(base_url=base, cookies={"portal_session": session}, timeout=30) as http:
            for name, path in [
                ("key list", "/sandbox/keys"),
                ("delivery log", "/sandbox/deliveries"),
                ("delivery log, page 2", None),
                ("audit trail", "/sandbox/audit"),
                ("overview (success rates)", "/sandbox/"),
            ]:
                if path is None:
                    first = http.get("/sandbox/deliveries").text
                    token = first.split("page=", 1)[1].split('"', 1)[0]
                    path = f"/sandbox/deliveries?page={token}"
                assert http.get(path).status_code == 200, path
                times: list[float] = []
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    t0 = time.perf_counter()
                    resp = http.get(path)
                    times.append(time.perf_counter() - t0)
                    assert resp.status_code == 200
                times.sort()
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                rows.append((name, len(times) / args.seconds, statistics.median(times) * 1000, p99 * 1000))
        print(f"\n{'page':28} {'pages/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
        for name, rate, p50, p99 in rows:
            print(f"{name:28} {rate:8.1f} {p50:8.1f} {p99:8.1f}")
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

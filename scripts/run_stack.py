#!/usr/bin/env python3
"""Run the whole stack locally: each service as its own process on SQLite files under ./var/.

The services talk gRPC over mutual TLS with a development CA made under ./var/tls/ on first run.
Ctrl-C (or SIGTERM) stops them all gracefully. Ports can be moved with the services' own
environment variables (AUTHSVC_LISTEN, WEBHOOKD_LISTEN, EDGE_LIVE_LISTEN, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from svckit import addresses

ROOT = pathlib.Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
TLS = VAR / "tls"


@dataclass
class Service:
    module: str
    args: list[str]
    ports: dict[str, object] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None

    @property
    def present(self) -> bool:
        return (ROOT / self.module.replace(".", "/") / "__main__.py").exists()


# Each service's own variable, else the address it listens on by default (svckit.addresses).
AUTH_LISTEN = os.environ.get("AUTHSVC_LISTEN", addresses.AUTHSVC)
WEBHOOKD_LISTEN = os.environ.get("WEBHOOKD_LISTEN", addresses.WEBHOOKD)
PORTAL_LISTEN = os.environ.get("PORTAL_LISTEN", addresses.PORTAL)


def secrets_key_file(name: str = "webhookd-secrets.key") -> pathlib.Path:
    """A key sealing secrets at rest (webhook signing secrets, TOTP seeds, the edge's stored idempotent
    responses) or signing the portal's CSRF tokens, made once per checkout (var/ is not committed)."""
    path = VAR / name
    if not path.exists():
        from svckit.secretbox import write_new_key

        VAR.mkdir(mode=0o700, exist_ok=True)
        write_new_key(path)
    return path


def tls_args(identity: str) -> list[str]:
    """The mutual-TLS flags of ``identity``, from the development CA under var/tls (made by main)."""
    from svckit.devca import flags

    return flags(TLS, identity)


def services() -> list[Service]:
    return [
        Service(
            "authsvc",
            [
                "--listen",
                AUTH_LISTEN,
                "--database",
                f"sqlite+aiosqlite:///{VAR / 'authsvc.db'}",
                "--metrics-listen",
                os.environ.get("AUTHSVC_METRICS_LISTEN", addresses.AUTHSVC_METRICS),
                "--webhookd",
                WEBHOOKD_LISTEN if (ROOT / "webhookd" / "__main__.py").exists() else "",
                "--secrets-key-file",
                str(secrets_key_file("authsvc-secrets.key")),
                *tls_args("authsvc"),
            ],
        ),
        Service(
            "webhookd",
            [
                "--listen",
                WEBHOOKD_LISTEN,
                "--database",
                f"sqlite+aiosqlite:///{VAR / 'webhookd.db'}",
                "--metrics-listen",
                os.environ.get("WEBHOOKD_METRICS_LISTEN", addresses.WEBHOOKD_METRICS),
                "--authsvc",
                AUTH_LISTEN,
                # Alert e-mails link the portal this stack runs (WEBHOOKD_PORTAL_URL, when set, wins).
                "--portal-url",
                os.environ.get("WEBHOOKD_PORTAL_URL", f"http://{PORTAL_LISTEN}"),
                # A development stack: receivers on this machine (and plain http) are allowed.
                "--allow-private-targets",
                "--allow-http",
                "--secrets-key-file",
                str(secrets_key_file()),
                *tls_args("webhookd"),
            ],
        ),
        Service(
            "edge",
            [
                "--authsvc",
                AUTH_LISTEN,
                "--webhookd",
                WEBHOOKD_LISTEN,
                "--database",
                f"sqlite+aiosqlite:///{VAR / 'edge.db'}",
                *tls_args("edge"),
                "--idempotency-key-file",
                str(secrets_key_file("edge-idempotency.key")),
            ],
        ),
        Service(
            "portal",
            [
                "--authsvc",
                AUTH_LISTEN,
                "--webhookd",
                WEBHOOKD_LISTEN,
                *tls_args("portal"),
                "--csrf-key-file",
                str(secrets_key_file("portal-csrf.key")),
            ],
        ),
    ]


# The reference product service (--with-example): the live upstream of the edge's default hotels routes.
HOTELS_LISTEN = os.environ.get("HOTELS_LISTEN", "127.0.0.1:9201")


def example_service() -> Service:
    """examples/hotels behind the edge: HTTPS with its product:hotels certificate, the edge's verified."""
    args = ["--listen", HOTELS_LISTEN, "--authsvc", AUTH_LISTEN, "--webhookd", WEBHOOKD_LISTEN]
    return Service("examples.hotels", [*args, *tls_args("product:hotels")])


def start(svc: Service) -> None:
    log = open(VAR / f"{svc.module}.log", "a")
    svc.proc = subprocess.Popen(
        [sys.executable, "-m", svc.module, "serve", *svc.args],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=ROOT,
    )
    assert svc.proc.stdout is not None
    for line in svc.proc.stdout:
        if line.startswith("READY "):
            svc.ports = json.loads(line[6:])
            return
    raise SystemExit(f"{svc.module} exited before it was ready; see {VAR / (svc.module + '.log')}")


async def demo_key(running: list[Service]) -> dict[str, Any]:
    """A fresh sandbox key for the demo account (made on the first run), so the printed examples work.

    var/demo.json remembers the account and key ids only, never the secret (no secret at rest outside
    the hashed column that owns it): each run rotates the previous demo key (it keeps working for 24 h,
    so a running `svc listen` carries on) and prints the new secret.
    """
    from svcctl.client import create_demo_key
    from svckit.devca import files
    from svckit.tls import Tls

    state = VAR / "demo.json"
    known = json.loads(state.read_text()) if state.exists() else {}
    demo = await create_demo_key(
        AUTH_LISTEN,
        Tls.from_files(*files(TLS, "svcctl")),
        account_id=str(known.get("account_id", "")),
        replaces=str(known.get("key_id", "")),
    )
    state.write_text(json.dumps({"account_id": demo["account_id"], "key_id": demo["key_id"]}))
    return demo


def portal_sign_in(account_id: str, portal_url: str) -> str:
    """A one-time sign-in link for the demo account's owner (an invitation), or how to sign in."""
    import grpc

    from svckit.devca import files
    from svckit.tls import Tls
    from travel.auth.v1 import auth_pb2, identity_pb2, identity_pb2_grpc

    svcctl = Tls.from_files(*files(TLS, "svcctl")).channel_credentials()
    override = [("grpc.ssl_target_name_override", "authsvc")]
    with grpc.secure_channel(AUTH_LISTEN, svcctl, options=override) as channel:
        try:
            made = identity_pb2_grpc.IdentityServiceStub(channel).CreateInvite(
                identity_pb2.CreateInviteRequest(
                    account_id=account_id,
                    email=DEMO_OWNER,
                    role=identity_pb2.USER_ROLE_OWNER,
                    actor=auth_pb2.Actor(user="ops:run_stack"),
                )
            )
        except grpc.RpcError:
            return f"sign in as {DEMO_OWNER} with the password you chose"
    return f"{portal_url}/invite/{made.token}  (one-time: choose {DEMO_OWNER}'s password)"


DEMO_OWNER = "owner@demo.example"


ENVIRONMENT = f"""environment (each service's own; unset: the development default):
  AUTHSVC_LISTEN           authsvc gRPC ({addresses.AUTHSVC})
  WEBHOOKD_LISTEN          webhookd gRPC ({addresses.WEBHOOKD})
  EDGE_LIVE_LISTEN         edge live HTTP listener ({addresses.EDGE_LIVE}); the live Host values follow it
  EDGE_SANDBOX_LISTEN      edge sandbox HTTP listener ({addresses.EDGE_SANDBOX}); the sandbox Host values \
follow it
  PORTAL_LISTEN            portal HTTP listener ({addresses.PORTAL}); webhookd's alert e-mails link it
  AUTHSVC_METRICS_LISTEN, WEBHOOKD_METRICS_LISTEN, EDGE_METRICS_LISTEN, PORTAL_METRICS_LISTEN   Prometheus \
/metrics ({addresses.AUTHSVC_METRICS}, {addresses.WEBHOOKD_METRICS}, {addresses.EDGE_METRICS}, \
{addresses.PORTAL_METRICS})
  EDGE_*, WEBHOOKD_*, AUTHSVC_*, PORTAL_*   any other flag of `python -m <service> serve --help`
Several processes of a service are run as docs/operations.md says: every peer flag (--authsvc,
--webhookd) takes IP:PORT addresses comma-separated; `python -m <service> migrate` upgrades a database.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/run",
        description=__doc__,
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--with-example",
        action="store_true",
        help=f"also start the reference hotels service (examples/hotels) on {HOTELS_LISTEN}, the live "
        "upstream of the edge's hotels routes (docs/product-services.md)",
    )
    return parser


def edge_lines(sandbox_port: object, secret: str | None) -> list[str]:
    """How to call the edge, at the port its sandbox listener really bound."""
    base = f"{addresses.EDGE_SANDBOX.rpartition(':')[0]}:{sandbox_port}"
    return [
        f"HTTP:         curl -s -H 'Authorization: Svc {secret}' http://{base}/v1/account",
        f"WebSocket:    .venv/bin/python scripts/ws_example.py ws://{base}/v1/stream {secret}",
        f"Webhooks:     SVC_API_KEY={secret} SVC_BASE_URL=http://{base} .venv/bin/svc listen "
        "--forward-to http://localhost:3000/webhooks",
        "Sandbox:      docs/sandbox.md (triggers, simulator, svc trigger)",
    ]


def main() -> int:
    args = build_parser().parse_args()
    # Everything under var/ (keys, SQLite files with hashed and sealed secrets, logs) is the user's alone;
    # the services started here inherit the mask.
    os.umask(0o077)
    VAR.mkdir(mode=0o700, exist_ok=True)
    from svckit.devca import IDENTITIES, init_dir

    identities = (*IDENTITIES, "product:hotels") if args.with_example else IDENTITIES
    if init_dir(TLS, identities):  # once per checkout: a development CA and a certificate per service
        print(f"made development certificates in {TLS.relative_to(ROOT)}/ (svcctl certs init)")
    running: list[Service] = []
    try:
        for svc in [*services(), *([example_service()] if args.with_example else [])]:
            if svc.present:
                start(svc)
                running.append(svc)
                print(f"started {svc.module}: {json.dumps(svc.ports)}  (log: var/{svc.module}.log)")
        demo = asyncio.run(demo_key(running))
        secret, account = str(demo["secret"]), str(demo["account_id"])
        print()
        print("Demo sandbox key (shown once; a new one each run, the previous one rolled):", secret)
        print(f"Admin CLI:    .venv/bin/svcctl --authsvc {AUTH_LISTEN} keys list --account {account}")
        portal = next((s for s in running if s.module == "portal"), None)
        if portal is not None:
            print(f"Portal:       {portal.ports['url']}")
            print(f"Sign-in:      {portal_sign_in(account, str(portal.ports['url']))}")
        edge = next((s for s in running if s.module == "edge"), None)
        if edge is not None:
            print("\n".join(edge_lines(edge.ports["sandbox_port"], secret)))
            # Liveness and readiness (docs/operations.md "Health"): 503 names a dependency that is down.
            print(f"Readiness:    curl http://127.0.0.1:{edge.ports['sandbox_port']}/readyz")
        if args.with_example:
            print(
                f"Hotels:       live /v1/hotels/* on the edge's live port go to examples/hotels (https://"
                f"{HOTELS_LISTEN}); a live key: .venv/bin/svcctl --authsvc {AUTH_LISTEN} keys create "
                f"--account {account} --environment live --scope hotels:read --scope hotels:write"
            )
            # Live mode A bookings hold credit (docs/product-services.md "Credit (mode A)"): none is set.
            print(
                f"Credit:       live mode A bookings spend credit: .venv/bin/svcctl --authsvc {AUTH_LISTEN} "
                f"ledger set-limit {account} 1000000 --currency EUR"
            )
        print("\nCtrl-C stops everything.")
        while all(s.proc is not None and s.proc.poll() is None for s in running):
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        for svc in reversed(running):
            if svc.proc and svc.proc.poll() is None:
                svc.proc.send_signal(signal.SIGTERM)
        for svc in reversed(running):
            if svc.proc:
                try:
                    svc.proc.wait(15)
                except subprocess.TimeoutExpired:
                    svc.proc.kill()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sys.exit(main())

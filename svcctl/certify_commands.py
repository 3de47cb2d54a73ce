"""``svcctl certify start|status|finish|report|keys``: certification runs, for operators and account
managers (docs/sandbox.md "Go live" has what a run checks; authsvc keeps the runs and signs the reports).

    svcctl certify start --account acct_... --key key_... [--length 30m] [--fault-every 7]
    svcctl certify status --account acct_... [--run crun_...]
    svcctl certify probe --account acct_... --run crun_...    (webhook probes, answers recorded)
    svcctl certify finish --account acct_... --run crun_...   (the checks, the signed report)
    svcctl certify report --account acct_... [--run crun_...] > report.json
    svcctl certify keys > keys.json                           (as GET /v1/certification/keys answers)

``finish`` reads from webhookd which event kinds the account's sandbox endpoints subscribe to and which
deliveries of the run succeeded, for the ``webhook_kinds`` check. authsvc sends the probes at the finish
itself when it knows webhookd and the run has none yet (authsvc._certify_close): ``probe`` is for an early
look. Partners finish their own runs (``svc certify finish``), and authsvc closes a run past its end.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from google.protobuf import duration_pb2

from svcctl.client import auth_client, count, duration, hooks_client, print_message
from svckit import certreport
from svckit.clients.hooks import sandbox_webhook_facts
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb


async def _start(a: argparse.Namespace) -> int:
    async with auth_client(a) as auth:
        length: duration_pb2.Duration | None = a.length
        print_message(
            await auth.start_certification_run(
                pb.StartCertificationRunRequest(
                    account_id=a.account,
                    key_id=a.key,
                    length=length,
                    fault_every=a.fault_every,
                    actor=pb.Actor(user=a.actor),
                )
            )
        )
    return 0


async def _status(a: argparse.Namespace) -> int:
    async with auth_client(a) as auth:
        got = await auth.get_certification_run(
            pb.GetCertificationRunRequest(account_id=a.account, run_id=a.run)
        )
    print_message(got.run)
    return 0


async def _webhook_facts(
    a: argparse.Namespace, since: Any
) -> tuple[list[str], list[pb.CertificationDelivery]]:
    """The kinds the account's sandbox endpoints name, and the run's deliveries (succeeded: 2xx)."""
    async with hooks_client(a) as hooks:
        kinds, deliveries = await sandbox_webhook_facts(hooks, a.account, since)
    return kinds, [
        pb.CertificationDelivery(delivery_id=i, event_type=kind, status=status)
        for i, kind, status in deliveries
    ]


async def _probe(a: argparse.Namespace) -> int:
    """Send the probe deliveries now (webhookd) and record their answers in the run (authsvc)."""
    async with hooks_client(a) as hooks:
        sent = await hooks.send_certification_probes(wpb.SendCertificationProbesRequest(account_id=a.account))
    probes = [
        pb.CertificationProbe(
            delivery_id=r.delivery_id, kind=r.kind, scheme=r.scheme, status=r.status, latency=r.latency
        )
        for r in sent.results
    ]
    async with auth_client(a) as auth:
        await auth.record_certification_probes(
            pb.RecordCertificationProbesRequest(account_id=a.account, run_id=a.run, probes=probes)
        )
    print_message(sent)
    return 0


async def _finish(a: argparse.Namespace) -> int:
    async with auth_client(a) as auth:
        run = (
            await auth.get_certification_run(
                pb.GetCertificationRunRequest(account_id=a.account, run_id=a.run)
            )
        ).run
        kinds, deliveries = await _webhook_facts(a, run.started_at)
        done = await auth.finish_certification_run(
            pb.FinishCertificationRunRequest(
                account_id=a.account,
                run_id=a.run,
                subscribed_kinds=kinds,
                deliveries=deliveries,
                actor=pb.Actor(user=a.actor),
            )
        )
    print_message(done.run)
    return 0


async def _report(a: argparse.Namespace) -> int:
    async with auth_client(a) as auth:
        got = await auth.get_certification_run(
            pb.GetCertificationRunRequest(account_id=a.account, run_id=a.run)
        )
    if not got.report:
        print("svcctl certify report: the run is still open (finish it first)")
        return 1
    print(got.report, end="")
    return 0


async def _keys(a: argparse.Namespace) -> int:
    async with auth_client(a) as auth:
        listed = await auth.list_certification_keys(pb.ListCertificationKeysRequest())
    keys = [certreport.parse_public_key(k.public_key).as_json() for k in listed.keys]
    print(json.dumps({"keys": keys}, indent=2))
    return 0


def register(groups: Any) -> None:
    cert = groups.add_parser("certify", help="certification runs and their signed reports").add_subparsers(
        dest="command", required=True
    )

    def cmd(name: str, help: str, handler: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = cert.add_parser(name, help=help, description=help)
        parser.set_defaults(handler=handler)
        return parser

    p = cmd("start", "open a certification run for one sandbox key", _start)
    p.add_argument("--account", required=True)
    p.add_argument("--key", required=True, help="a sandbox key of the account")
    p.add_argument("--length", type=duration, default=None, help="default 30m; at most 2h")
    p.add_argument("--fault-every", type=count, default=0, help="a fault every N POSTs (default 7)")
    for name, help, handler in (
        ("status", "show a run (default: the latest)", _status),
        ("report", "print a finished run's signed report (the file to forward)", _report),
    ):
        p = cmd(name, help, handler)
        p.add_argument("--account", required=True)
        p.add_argument("--run", default="", help="crun_...; default the latest")
    p = cmd(
        "probe", "send the probe deliveries to the account's sandbox endpoints, record the answers", _probe
    )
    p.add_argument("--account", required=True)
    p.add_argument("--run", required=True)
    p = cmd("finish", "evaluate every check and sign the report", _finish)
    p.add_argument("--account", required=True)
    p.add_argument("--run", required=True)
    cmd("keys", "the published report-signing keys (the keys file svc certify verify reads)", _keys)

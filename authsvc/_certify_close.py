"""Closing a certification run without an operator (docs/sandbox.md "Go live"): what authsvc asks webhookd
before it evaluates the checks, and the housekeeping that closes a run past its end.

When authsvc knows webhookd (``--webhookd``), finishing a run (the partner's ``POST
/v1/certification/runs/latest/finish``, ``svc certify finish``, the portal's Finish button, an operator's
``svcctl certify finish``, or this module's housekeeping once the run's end has passed) first:

1. sends the probe deliveries to the account's enabled sandbox endpoints (webhookd
   ``SendCertificationProbes``) and records their answers on the run, unless the run already has probe
   answers (an operator's ``svcctl certify probe``): the probes go out when the partner says its
   integration is done, so its receiver is up by then;
2. reads the kinds the sandbox endpoints subscribe to (wildcards are not counted) and the run's
   sandbox deliveries (succeeded: 2xx), for the ``webhook_kinds`` check, unless the finishing caller
   gave them (``svcctl certify finish`` reads the same from webhookd).

The probes are sent one after another, each cut off after webhookd's delivery timeout (10 s): a finish
waits for them (at most 20 endpoints, 8 probes each). Without webhookd the caller's facts are used as given.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable

from authsvc._certify_rules import Delivery, Probe
from authsvc._periodic import Periodic
from authsvc._repository import Repository
from authsvc._sql_certify import CertRun
from svckit.certification import ProbeKind
from svckit.clients import HooksClient
from svckit.clients.hooks import sandbox_webhook_facts
from svckit.clock import Clock
from svckit.protos import timestamp as ts
from travel.webhooks.v1 import webhooks_pb2 as wpb

log = logging.getLogger(__name__)

# How often the housekeeping looks for open runs past their end (seconds), and how many it closes a turn.
CLOSE_INTERVAL = 30.0
CLOSE_BATCH = 20
# A finish waits for the probes: the gRPC deadline of SendCertificationProbes (seconds).
PROBE_DEADLINE = 300.0


async def send_probes(hooks: HooksClient, repo: Repository, run: CertRun) -> int:
    """Probe the account's sandbox endpoints now and record the answers on ``run``; how many."""
    sent = await hooks.send_certification_probes(
        wpb.SendCertificationProbesRequest(account_id=run.account_id), timeout=PROBE_DEADLINE
    )
    probes = [
        {
            "delivery_id": r.delivery_id[:64],
            "kind": ProbeKind(r.kind).value,
            "scheme": r.scheme[:16],
            "status": r.status,
            "latency": r.latency.ToTimedelta().total_seconds(),
        }
        for r in sent.results
    ]
    return await repo.cert_record_probes(run.account_id, run.id, probes)


async def webhook_facts(hooks: HooksClient, run: CertRun) -> tuple[list[str], list[Delivery]]:
    """The kinds the account's sandbox endpoints name, and the deliveries made since the run started."""
    kinds, deliveries = await sandbox_webhook_facts(hooks, run.account_id, ts(run.started_at))
    return kinds, [Delivery(*d) for d in deliveries]


async def gather(
    hooks: HooksClient, repo: Repository, run: CertRun, kinds: list[str], deliveries: list[Delivery]
) -> tuple[CertRun, list[str], list[Delivery]]:
    """Before the checks: the probes (unless already answered), then the webhook facts (unless the
    caller gave them: an operator's svcctl reads the same from webhookd); the run as re-read with its
    probe answers."""
    if not run.probes:
        await send_probes(hooks, repo, run)
        run = await repo.cert_get(run.account_id, run.id)
    if not kinds and not deliveries:
        kinds, deliveries = await webhook_facts(hooks, run)
    return run, kinds, deliveries


def probes_of(run: CertRun) -> list[Probe]:
    return [
        Probe(
            p["delivery_id"],
            ProbeKind(p["kind"]),
            p["scheme"],
            int(p["status"]),
            dt.timedelta(seconds=p["latency"]),
        )
        for p in run.probes
    ]


class RunCloser(Periodic):
    """Finishes every open run past its end (probes, checks, the signed report), every ``interval``
    seconds and once at start. A run whose finish fails (webhookd down) is tried again next turn."""

    task_name = "certification-close"
    failure = "closing expired certification runs failed; will retry"
    log = log

    def __init__(
        self,
        repo: Repository,
        clock: Clock,
        close: Callable[[CertRun], Awaitable[object]],
        interval: float = CLOSE_INTERVAL,
    ) -> None:
        super().__init__(interval)
        self.repo = repo
        self.clock = clock
        self.close = close

    async def once(self) -> int:
        closed = 0
        for run in await self.repo.cert_expired(self.clock.now(), CLOSE_BATCH):
            try:
                await self.close(run)
            except Exception:
                log.exception("could not close an expired certification run", extra={"run_id": run.id})
            else:
                closed += 1
        return closed

"""AuthService's certification RPCs (operators): whether an account must be certified before it may
create live keys, and the audited override (authsvc._certify_gate has the rule, CreateKey applies it)."""

from __future__ import annotations

import datetime as dt
import logging

import grpc
from google.protobuf import duration_pb2

from authsvc import _convert as cv
from authsvc import _validate as v
from authsvc._certify_close import gather, probes_of
from authsvc._certify_report import build, new_signing_key, public_key, sign
from authsvc._certify_rules import Delivery, RunRequest, evaluate, passed
from authsvc._errors import Conflict, InvalidRequest, NotFound, Unavailable
from authsvc._model import Actor, KeyChange
from authsvc._service_base import ServicerBase
from authsvc._sql_certify import FINISHED, OPEN, CertRun
from svckit.certification import FAULT_EVERY, FAULT_RETRY_AFTER, Fault, ProbeKind
from svckit.clients import ClientError, HooksClient
from svckit.ids import new_id
from svckit.peers import portal_user_var
from svckit.protos import timestamp as ts
from svckit.secretbox import SecretBox
from svckit.vocabulary import Environment
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)


class CertificationRpcs(ServicerBase):
    async def SetCertificationRequired(
        self, request: pb.SetCertificationRequiredRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetCertificationRequiredResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        now = self.clock.now()
        account, changed = await self.repo.set_certification(
            account_id, actor, now, required=request.required
        )
        if changed:
            self._changed(KeyChange("account_updated", "", account_id, now))
            log.info(
                "certification requirement set",
                extra={"account_id": account_id, "required": request.required, "actor": actor.user},
            )
        return pb.SetCertificationRequiredResponse(account=cv.account(account))

    async def OverrideCertification(
        self, request: pb.OverrideCertificationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OverrideCertificationResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        reason = v.text(request.reason, "reason", max_len=v.MAX_REASON, required=True)
        now = self.clock.now()
        account, _ = await self.repo.set_certification(
            account_id, actor, now, certify_reason="override: " + reason
        )
        self._changed(KeyChange("account_updated", "", account_id, now))
        log.info("certification overridden", extra={"account_id": account_id, "actor": actor.user})
        return pb.OverrideCertificationResponse(account=cv.account(account))


# -- runs --------------------------------------------------------------------------------------------

DEFAULT_LENGTH = dt.timedelta(minutes=30)
MAX_LENGTH = dt.timedelta(hours=2)
MAX_FAULT_EVERY = 1000
MAX_RECORDS = 1000
RUN_STATUS = {OPEN: pb.CERTIFICATION_RUN_STATUS_OPEN, FINISHED: pb.CERTIFICATION_RUN_STATUS_FINISHED}


def run_pb(run: CertRun) -> pb.CertificationRun:
    return pb.CertificationRun(
        id=run.id,
        account_id=run.account_id,
        key_id=run.key_id,
        status=RUN_STATUS[run.status],
        started_at=ts(run.started_at),
        ends_at=ts(run.ends_at),
        finished_at=ts(run.finished_at) if run.finished_at else None,
        passed=bool(run.passed),
        fault_every=run.fault_every,
        posts=run.posts,
        requests=run.requests,
    )


def run_length(given: duration_pb2.Duration | None) -> dt.timedelta:
    if given is None or (given.seconds == 0 and given.nanos == 0):
        return DEFAULT_LENGTH
    length = given.ToTimedelta()
    if not dt.timedelta(seconds=1) <= length <= MAX_LENGTH:
        raise InvalidRequest("length: from 1 s to 2 h")
    return length


class CertificationRunRpcs(ServicerBase):
    # The sealing of the report-signing keys' private halves (authsvc's secrets key); None: stored plain
    # (development, as every sealed value without a key).
    cert_box: SecretBox | None = None
    # webhookd, for the probes and the webhook facts a finish gathers (authsvc._certify_close); None: the
    # finishing caller gives the facts (the probes then come from ``svcctl certify probe``).
    cert_hooks: HooksClient | None = None

    @staticmethod
    def _own_account(account_id: str) -> str:
        """``account_id``, when a portal call may see it: its user's own (another account's runs are
        not found)."""
        portal = portal_user_var.get()
        if portal is not None and account_id != portal.account_id:
            raise NotFound("no certification run")
        return account_id

    async def _signing_key(self) -> str:
        """The newest report-signing key (crsk_...), made and stored sealed on first use."""
        found = await self.repo.cert_signing_keys()
        if not found:
            made = new_signing_key()
            public = public_key(made)
            sealed = self.cert_box.seal(made, public.key_id) if self.cert_box else made
            await self.repo.cert_add_signing_key(public.key_id, public.text, sealed, self.clock.now())
            found = await self.repo.cert_signing_keys()
        key_id, _public, sealed = found[0]
        return self.cert_box.open(sealed, key_id) if self.cert_box else sealed

    async def StartCertificationRun(
        self, request: pb.StartCertificationRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.StartCertificationRunResponse:
        actor = self._actor(request.actor, context)
        account_id = self._own_account(v.ident(request.account_id, "account_id", "acct"))
        key = self._owned(await self.repo.get_key(v.ident(request.key_id, "key_id", "key")))
        now = self.clock.now()
        if key.account_id != account_id:
            raise NotFound(f"key_id: no key {key.id!r}")  # another account's key is not named
        if key.environment != Environment.SANDBOX:
            raise InvalidRequest(
                "key_id: a certification run uses a sandbox key (it never touches live traffic)"
            )
        if key.revoked_at is not None or (key.expires_at is not None and key.expires_at <= now):
            raise InvalidRequest("key_id: the key is revoked or expired")
        every = request.fault_every or FAULT_EVERY
        if not 1 <= every <= MAX_FAULT_EVERY:
            raise InvalidRequest(f"fault_every: from 1 to {MAX_FAULT_EVERY}")
        length = run_length(request.length if request.HasField("length") else None)
        run = CertRun(new_id("crun"), account_id, key.id, OPEN, now, now + length, every)
        await self.repo.cert_start(run, actor)
        self._changed(KeyChange("account_updated", "", account_id, now))
        log.info("certification run started", extra={"account_id": account_id, "run_id": run.id})
        return pb.StartCertificationRunResponse(run=run_pb(run))

    async def GetCertificationRun(
        self, request: pb.GetCertificationRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCertificationRunResponse:
        account_id = self._own_account(v.ident(request.account_id, "account_id", "acct"))
        run = await self.repo.cert_get(account_id, request.run_id)
        return pb.GetCertificationRunResponse(run=run_pb(run), report=run.report)

    async def ClaimCertificationFault(
        self, request: pb.ClaimCertificationFaultRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClaimCertificationFaultResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        nth, fault = await self.repo.cert_claim(account_id, request.run_id, self.clock.now())
        return pb.ClaimCertificationFaultResponse(
            nth_post=nth,
            fault=fault.value if fault else "",
            retry_after=FAULT_RETRY_AFTER if fault is Fault.RATE_LIMITED else 0,
        )

    async def RecordCertificationRequests(
        self, request: pb.RecordCertificationRequestsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordCertificationRequestsResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        if len(request.requests) > MAX_RECORDS:
            raise InvalidRequest(f"requests: at most {MAX_RECORDS}")
        records = []
        for r in request.requests:
            try:
                fault = Fault(r.fault) if r.fault else None
            except ValueError:
                raise InvalidRequest(f"requests.fault: unknown fault {r.fault[:40]!r}") from None
            records.append(
                RunRequest(
                    request_id=r.request_id,
                    method=r.method,
                    path=r.path,
                    status=r.status,
                    received_at=r.received_at.ToDatetime(dt.UTC),
                    error_type=r.error_type,
                    idempotency_key=r.idempotency_key_digest,
                    body=r.body_digest,
                    fault=fault,
                    retry_after=r.retry_after,
                    probe=r.probe,
                )
            )
        keys = [r.key_id for r in request.requests]
        filed = await self.repo.cert_record(account_id, request.run_id, records, keys)
        return pb.RecordCertificationRequestsResponse(recorded=filed)

    async def RecordCertificationProbes(
        self, request: pb.RecordCertificationProbesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordCertificationProbesResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        probes = []
        for p in request.probes:
            try:
                kind = ProbeKind(p.kind)
            except ValueError:
                raise InvalidRequest(f"probes.kind: unknown probe kind {p.kind[:40]!r}") from None
            latency = p.latency.ToTimedelta().total_seconds()
            probes.append(
                {
                    "delivery_id": p.delivery_id[:64],
                    "kind": kind.value,
                    "scheme": p.scheme[:16],
                    "status": p.status,
                    "latency": latency,
                }
            )
        filed = await self.repo.cert_record_probes(account_id, request.run_id, probes)
        return pb.RecordCertificationProbesResponse(recorded=filed)

    async def FinishCertificationRun(
        self, request: pb.FinishCertificationRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.FinishCertificationRunResponse:
        actor = self._actor(request.actor, context)
        account_id = self._own_account(v.ident(request.account_id, "account_id", "acct"))
        # "latest" (or ""): the account's latest run, as the partner's routes name it.
        run_id = "" if request.run_id in ("", "latest") else v.ident(request.run_id, "run_id", "crun")
        run = await self.repo.cert_get(account_id, run_id)
        if run.status != OPEN:
            raise Conflict(f"run_id: run {run.id} is already finished")
        deliveries = [Delivery(d.delivery_id, d.event_type, d.status) for d in request.deliveries]
        done = await self._close(run, actor, list(request.subscribed_kinds), deliveries)
        return pb.FinishCertificationRunResponse(run=run_pb(done), report=done.report)

    async def close_expired(self, run: CertRun) -> CertRun:
        """The housekeeping's finish of a run past its end (authsvc._certify_close.RunCloser)."""
        return await self._close(run, Actor("authsvc: run ended", "", ""), [], [])

    async def _close(
        self, run: CertRun, actor: Actor, kinds: list[str], deliveries: list[Delivery]
    ) -> CertRun:
        """Probes and webhook facts from webhookd when authsvc knows it (authsvc._certify_close), else
        the caller's; then every check, the signed report, the run closed."""
        if self.cert_hooks is not None:
            try:
                run, kinds, deliveries = await gather(self.cert_hooks, self.repo, run, kinds, deliveries)
            except ClientError as exc:
                raise Unavailable(f"webhookd did not answer ({exc.type}); try again") from None
        now = self.clock.now()
        results = evaluate(await self.repo.cert_requests(run.id), probes_of(run), deliveries, kinds)
        report = build(
            run_id=run.id,
            account_id=run.account_id,
            key_id=run.key_id,
            started_at=run.started_at,
            ended_at=min(now, run.ends_at),
            results=results,
        )
        signed = sign(report, await self._signing_key()).decode()
        done = await self.repo.cert_finish(run, passed(results), signed, actor, now)
        self._changed(KeyChange("account_updated", "", run.account_id, now))
        log.info(
            "certification run finished",
            extra={"account_id": run.account_id, "run_id": run.id, "passed": done.passed},
        )
        return done

    async def ListCertificationKeys(
        self, request: pb.ListCertificationKeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCertificationKeysResponse:
        if not await self.repo.cert_signing_keys():
            await self._signing_key()
        keys = [
            pb.CertificationKey(key_id=k, public_key=p) for k, p, _ in await self.repo.cert_signing_keys()
        ]
        return pb.ListCertificationKeysResponse(keys=keys)

"""A certification run through the edge over real HTTP against real processes: the run key's POSTs get
the published fault schedule (a 503, then a 429 with Retry-After) without reaching the product, its GETs
marked as probes never; another key of the same account and another account are untouched; every request
of the run key is recorded for the checks (with digests, not values)."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib

import httpx

from svccli.certify import show
from svckit import certreport
from tests.integration.edge_stack import ACTOR, Stack, assert_error, auth, hdrs, http, new_key, stack  # noqa: F401 (the fixtures)
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc


async def test_faults_and_records_of_the_run_key_only(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth)
    _, sibling = await new_key(auth, account_id=account_id)
    _, stranger = await new_key(auth)
    run = (
        await auth.StartCertificationRun(
            pb.StartCertificationRunRequest(
                account_id=account_id, key_id=key.key.id, fault_every=2, actor=ACTOR
            )
        )
    ).run
    url = stack.url() + "/v1/hotels/bookings"

    async def book(secret: str, n: int) -> httpx.Response:
        h = hdrs(
            secret,
            Idempotency_Key=f"cert-{secret[-6:]}-{n}",
            X_Partner_Customer_Ref="cust-1",
            Content_Type="application/json",
        )
        return await http.post(url, headers=h, content=json.dumps({"offer": n}).encode())

    # The edge learns of the run from its key cache (the account changed): poll until the first fault.
    for _ in range(100):
        first = await book(key.secret, 0)
        if first.status_code == 503:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("no fault injected")
    assert_error(first, 503, "service_unavailable")
    before = len(stack.sandbox_up.requests)
    assert (await book(key.secret, 1)).status_code == 200  # an odd POST reaches the product
    limited = await book(key.secret, 2)
    assert_error(limited, 429, "rate_limited")
    assert limited.headers["retry-after"] == "2"
    assert len(stack.sandbox_up.requests) == before + 1
    # GETs are never faulted; a probe GET is recorded as one.
    probe = await http.get(
        stack.url() + "/v1/hotels/search", headers={**hdrs(key.secret), "X-Certification-Probe": "1"}
    )
    assert probe.status_code == 200
    # Another key of the same account, and another account, are not part of the run.
    for secret in (sibling.secret, stranger.secret):
        assert [(await book(secret, n)).status_code for n in range(4)] == [200] * 4

    for _ in range(100):
        got = (
            await auth.GetCertificationRun(
                pb.GetCertificationRunRequest(account_id=account_id, run_id=run.id)
            )
        ).run
        if got.requests >= 5:
            break
        await asyncio.sleep(0.1)
    got = (
        await auth.GetCertificationRun(pb.GetCertificationRunRequest(account_id=account_id, run_id=run.id))
    ).run
    # Every request of the run key from the first fault on (earlier polls too), none of the others'.
    assert (got.posts, got.requests) == (4, 5)
    done = await auth.FinishCertificationRun(
        pb.FinishCertificationRunRequest(account_id=account_id, run_id=run.id, actor=ACTOR)
    )
    checks = {c["name"]: c for c in json.loads(done.report)["report"]["checks"]}
    assert checks["idempotency_key_present"]["passed"]
    assert checks["honours_retry_after"]["passed"]  # the probe GET after the 429 does not count
    assert checks["retry_reuses_key"]["passed"]  # the 503'd POST was not retried: nothing to reuse
    # After the run: no more faults for the key.
    assert not (
        await auth.GetAccount(pb.GetAccountRequest(account_id=account_id))
    ).account.certification.open_run_id
    codes = [(await book(key.secret, 10 + n)).status_code for n in range(2)]
    for _ in range(50):
        if codes == [200, 200]:
            break
        await asyncio.sleep(0.1)
        codes = [(await book(key.secret, 20 + n)).status_code for n in range(2)]
    assert codes == [200, 200]


async def test_the_run_keys_successes_are_all_in_the_request_log(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    """The request log samples successes (at most 25 of an account's a second here); a run's key has
    every one filed, so each piece of a report's evidence can be looked up. Another key of the same
    account, sending as many at once, is still sampled (and proves the burst was over the sample)."""
    account_id, _ = await new_key(auth)

    async def fast_key() -> pb.CreateKeyResponse:  # a key's own rate limit well above the burst
        made: pb.CreateKeyResponse = await auth.CreateKey(
            pb.CreateKeyRequest(
                account_id=account_id,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="burst",
                scopes=["hotels:read"],
                rate_limit=10_000,
                actor=ACTOR,
            )
        )
        return made

    key, sibling = await fast_key(), await fast_key()
    await auth.StartCertificationRun(
        pb.StartCertificationRunRequest(
            account_id=account_id, key_id=key.key.id, fault_every=1000, actor=ACTOR
        )
    )
    url = stack.url() + "/v1/hotels/search"
    for _ in range(100):  # until the edge answers with the run in its cache (a probe: recorded)
        await http.get(url, headers={**hdrs(key.secret), "X-Certification-Probe": "1"})
        got = (await auth.GetCertificationRun(pb.GetCertificationRunRequest(account_id=account_id))).run
        if got.requests:
            break
        await asyncio.sleep(0.1)

    async def burst(secret: str) -> list[str]:
        answers = await asyncio.gather(*(http.get(url, headers=hdrs(secret)) for _ in range(80)))
        assert {a.status_code for a in answers} == {200}
        return [a.headers["x-request-id"] for a in answers]

    mine, theirs = await burst(key.secret), await burst(sibling.secret)

    async def filed(key_id: str) -> set[str]:
        listed = await auth.ListRequests(
            pb.ListRequestsRequest(account_id=account_id, key_id=key_id, page_size=200)
        )
        return {r.request_id for r in listed.requests}

    for _ in range(50):
        if set(mine) <= await filed(key.key.id):
            break
        await asyncio.sleep(0.1)
    assert set(mine) <= await filed(key.key.id)
    assert len(set(theirs) & await filed(sibling.key.id)) < len(theirs)


async def test_a_partner_starts_reads_and_verifies_its_run(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient, tmp_path: pathlib.Path
) -> None:
    """The partner's routes: POST /v1/certification/runs opens a run for the calling key (one at a time,
    sandbox only), GET .../runs/latest reads it and, once finished, serves the signed report byte for byte;
    GET /v1/certification/keys publishes the key it verifies with (svc certify report/keys/verify)."""
    account_id, key = await new_key(auth)
    _, live = await new_key(auth, "live", account_id=account_id)
    base = stack.url()
    post = {"Idempotency-Key": "start-1", "Content-Type": "application/json"}
    started = await http.post(
        base + "/v1/certification/runs", headers=hdrs(key.secret, **post), content=b'{"length": "10m"}'
    )
    assert started.status_code == 201, started.text
    run = started.json()
    assert (run["apiKey"], run["status"], run["reportFile"]) == (key.key.id, "running", None)
    again = await http.post(
        base + "/v1/certification/runs",
        headers=hdrs(key.secret, **{**post, "Idempotency-Key": "start-2"}),
        content=b"{}",
    )
    assert_error(again, 409, "conflict")
    live_url = stack.url("live") + "/v1/certification/runs/latest"
    assert_error(await http.get(live_url, headers=hdrs(live.secret, "live")), 404, "not_found")

    await auth.FinishCertificationRun(
        pb.FinishCertificationRunRequest(account_id=account_id, run_id=run["id"], actor=ACTOR)
    )
    latest = (await http.get(base + "/v1/certification/runs/latest", headers=hdrs(key.secret))).json()
    assert latest["status"] == "finished" and latest["passed"] is False
    keys = (await http.get(base + "/v1/certification/keys", headers=hdrs(key.secret))).json()

    for command, out in (("report", "r.json"), ("keys", "k.json")):
        args = argparse.Namespace(certify_command=command, out=str(tmp_path / out))
        assert show(args, latest if command == "report" else keys) == 0
    assert (tmp_path / "r.json").read_bytes() == latest["reportFile"].encode()
    report = certreport.verify(
        (tmp_path / "r.json").read_bytes(),
        certreport.parse_keys(json.loads((tmp_path / "k.json").read_text())),
    )
    assert report["runId"] == run["id"]


async def test_no_answer_of_a_run_is_a_500(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    """schemathesis, its run open, got a 500 from POST /v1/hotels/bookings: every fault of the schedule
    (503, 429, 504 and the 401 spell), and the POSTs between them, is answered as documented."""
    account_id, key = await new_key(auth)
    await auth.StartCertificationRun(
        pb.StartCertificationRunRequest(account_id=account_id, key_id=key.key.id, fault_every=2, actor=ACTOR)
    )
    url = stack.url() + "/v1/hotels/bookings"
    # The request schemathesis sent: an Idempotency-Key that is not UTF-8 (refused 400, and recorded).
    raw = [(k.encode(), v.encode()) for k, v in hdrs(key.secret, X_Partner_Customer_Ref="0").items()]
    bad = await http.post(url, headers=[*raw, (b"Idempotency-Key", b"\xed\xa0\x80\xff")], json={"offer": "x"})
    assert bad.status_code == 400, bad.text
    seen: list[int] = []
    for n in range(40):
        h = hdrs(key.secret, Idempotency_Key=f"c500-{n // 2}", X_Partner_Customer_Ref="0")
        resp = await http.post(
            url, headers={**h, "Content-Type": "application/json"}, json={"offer": "off_hotels_1"}
        )
        assert resp.status_code != 500, resp.text
        seen.append(resp.status_code)
        if {503, 429, 504, 401} <= set(seen):
            break
    assert {503, 429, 504, 401} <= set(seen), seen

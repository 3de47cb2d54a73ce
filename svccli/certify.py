"""``svc certify``: certification runs of the sandbox key, and their signed reports.

  svc certify start [--length 30m]                    open a run for this key (SVC_API_KEY)
  svc certify status                                  the account's latest run
  svc certify finish [--out report.json]              probe the webhook endpoints, evaluate, sign
  svc certify report --out report.json                its signed report, saved byte for byte
  svc certify keys --out keys.json                    the platform's report-signing keys
  svc certify verify report.json --keys keys.json     the keys as GET /v1/certification/keys answers
  svc certify verify report.json --key crpk_...       one published key

``verify`` needs no network and no API key: it checks the file is byte for byte as the platform wrote it
and that the platform's Ed25519 signature verifies, then prints each check. Exit 0: verified (whatever the
report says about the checks); 1: the report does not verify; 2: bad arguments or unreadable files.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from svckit import certreport


def add_parser(sub: Any) -> None:
    cert = sub.add_parser("certify", help="the certification report (verify it offline)")
    cert_sub = cert.add_subparsers(dest="certify_command", required=True)
    ver = cert_sub.add_parser("verify", help="verify a signed report with the platform's published key")
    ver.add_argument("report", help="the report file (JSON), as downloaded")
    keys = ver.add_mutually_exclusive_group(required=True)
    keys.add_argument("--keys", help="a file holding the answer of GET /v1/certification/keys")
    keys.add_argument("--key", help="one published report-signing key, crpk_...")
    start = cert_sub.add_parser("start", help="open a certification run for the calling sandbox key")
    start.add_argument("--length", default="", help="how long: 10m, 30m (the default), 2h at most")
    cert_sub.add_parser("status", help="the account's latest certification run")
    fin = cert_sub.add_parser(
        "finish",
        help="finish the latest run: the platform probes your sandbox webhook endpoints (your receiver "
        "must be running), evaluates every check and signs the report",
    )
    fin.add_argument("--out", default="", help="also save the signed report to this file")
    for name, what in (("report", "the latest run's signed report"), ("keys", "the report-signing keys")):
        p = cert_sub.add_parser(name, help=f"save {what} (exactly as served)")
        p.add_argument("--out", required=True, help="the file to write")


def offline(args: argparse.Namespace) -> bool:
    """Does this command run without the network (and without an API key)?"""
    return bool(args.command == "certify" and args.certify_command == "verify")


def summary(report: dict[str, Any]) -> list[str]:
    """The report as text lines: the verdict, then each check with its detail and evidence."""
    verdict = "PASSED" if report.get("passed") else "FAILED"
    run, account, key = report.get("runId"), report.get("accountId"), report.get("apiKeyId")
    lines = [f"run {run} of account {account}, key {key}: {verdict}"]
    for check in report.get("checks", []):
        mark = "pass" if check.get("passed") else "FAIL"
        line = f"  {mark}  {check.get('name')}: {check.get('detail')}"
        if check.get("evidence") and not check.get("passed"):
            line += " [" + ", ".join(check["evidence"]) + "]"
        lines.append(line)
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        data = pathlib.Path(args.report).read_bytes()
        if args.keys:
            keys = certreport.parse_keys(json.loads(pathlib.Path(args.keys).read_text()))
        else:
            keys = [certreport.parse_public_key(args.key.strip())]
    except (OSError, ValueError) as exc:
        print(f"svc certify verify: {exc}", file=sys.stderr)
        return 2
    try:
        report = certreport.verify(data, keys)
    except certreport.ReportError as exc:
        print(f"report does NOT verify: {exc}")
        return 1
    print("report verified: signed by the platform, unchanged")
    for line in summary(report):
        print(line)
    return 0


async def run_online(args: argparse.Namespace, headers: dict[str, str]) -> int:
    """``start``, ``status``, ``finish``, ``report`` and ``keys``: through the sandbox's API with the key."""
    import uuid

    import httpx

    # finish waits for the probe deliveries (each cut off after 10 s).
    timeout = 330 if args.certify_command == "finish" else 30
    async with httpx.AsyncClient(base_url=args.base_url, timeout=timeout) as http:
        if args.certify_command == "finish":
            idem = {"Idempotency-Key": f"svc-{uuid.uuid4()}"}
            resp = await http.post(
                "/v1/certification/runs/latest/finish", headers={**headers, **idem}, json={}
            )
        elif args.certify_command == "start":
            body = {"length": args.length} if args.length else {}
            idem = {"Idempotency-Key": f"svc-{uuid.uuid4()}"}
            resp = await http.post("/v1/certification/runs", headers={**headers, **idem}, json=body)
        elif args.certify_command == "keys":
            resp = await http.get(certreport.KEYS_PATH, headers=headers)
        else:
            resp = await http.get("/v1/certification/runs/latest", headers=headers)
    if resp.status_code >= 300:
        print(
            f"svc certify {args.certify_command}: HTTP {resp.status_code} {resp.text[:300]}", file=sys.stderr
        )
        return 1
    return show(args, resp.json())


def show(args: argparse.Namespace, answer: dict[str, Any]) -> int:
    """What ``start``, ``status``, ``report`` and ``keys`` print or save of the API's answer."""
    if args.certify_command == "keys":
        pathlib.Path(args.out).write_text(json.dumps(answer, indent=2) + "\n")
        print(f"{len(answer['keys'])} key(s) written to {args.out}")
        return 0
    if args.certify_command == "report":
        if not answer.get("reportFile"):
            print(
                f"svc certify report: run {answer['id']} is {answer['status']}: no report yet",
                file=sys.stderr,
            )
            return 1
        pathlib.Path(args.out).write_bytes(answer["reportFile"].encode())
        print(f"report of run {answer['id']} written to {args.out}: svc certify verify {args.out} --keys ...")
        return 0
    if args.certify_command == "finish" and args.out:
        pathlib.Path(args.out).write_bytes(answer["reportFile"].encode())
        print(f"report of run {answer['id']} written to {args.out}")
    verdict = "" if answer["passed"] is None else (": PASSED" if answer["passed"] else ": FAILED")
    print(f"run {answer['id']} ({answer['apiKey']}): {answer['status']}{verdict}, until {answer['endsAt']}")
    counts = f"{answer['requests']} requests recorded, {answer['posts']} POSTs"
    print(f"  {counts} (a fault every {answer['faultEvery']})")
    if answer.get("reportFile"):  # finished: each check (svc certify verify is what trusts it)
        for line in summary(json.loads(answer["reportFile"]).get("report", {}))[1:]:
            print(line)
    return 0

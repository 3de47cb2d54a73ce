"""``svc webhooks ...``: a partner's reconciliation after an outage and the Standard Webhooks public keys,
over the edge's HTTP API (docs/webhooks.md, "what to do after your outage").

  svc webhooks signing-keys [--endpoint we_...]          the ed25519 public keys of the v1a signatures
  svc webhooks events --undelivered-to we_...            the events held or failed for that endpoint
  svc webhooks recover we_... [--since 2h] [--dry-run]   queue them again (--dry-run: only count them)
  svc webhooks endpoints | add ...                       endpoints and their destinations (svccli.endpoints)
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import uuid
from typing import TYPE_CHECKING, Any

from svccli import endpoints

if TYPE_CHECKING:
    import httpx

# How far back ``recover`` reaches when --since is not given (argparse converts it like a typed one).
DEFAULT_SINCE = "24h"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_time(text: str, now: dt.datetime | None = None) -> str:
    """``--since`` as the RFC 3339 time the API takes: an age back from now (``30m``, ``2h``, ``7d``) or an
    RFC 3339 time (UTC when it names no offset)."""
    now = now or dt.datetime.now(dt.UTC)
    m = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if m:
        when = now - dt.timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])
    else:
        try:
            when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a time: {text!r} (RFC 3339, or an age like 2h or 7d)"
            ) from None
        when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def recover_line(endpoint: str, count: int, since: str, dry_run: bool) -> str:
    noun = "delivery" if count == 1 else "deliveries"
    if dry_run:
        return (
            f"{count} {noun} of {endpoint} would be queued again (held or failed since {since}); "
            "dry run: nothing changed"
        )
    return f"{count} {noun} of {endpoint} queued again (held or failed since {since})"


def add_parser(sub: Any) -> None:
    hooks = sub.add_parser("webhooks", help="reconcile an endpoint after an outage; the v1a public keys")
    cmds = hooks.add_subparsers(dest="webhooks_command", required=True)
    keys = cmds.add_parser("signing-keys", help="the ed25519 public keys of Standard Webhooks v1a signatures")
    keys.add_argument("--endpoint", help="only this endpoint's keys (we_...)")
    events = cmds.add_parser("events", help="the events whose delivery to an endpoint is held or failed")
    events.add_argument("--undelivered-to", required=True, metavar="ENDPOINT", help="we_...")
    rec = cmds.add_parser("recover", help="queue an endpoint's held and failed deliveries again")
    rec.add_argument("endpoint", help="we_...")
    rec.add_argument(
        "--since", type=since_time, default=DEFAULT_SINCE, help="RFC 3339 time or an age (default 24h)"
    )
    rec.add_argument("--dry-run", action="store_true", help="only count them; change nothing")
    endpoints.add_parsers(cmds)


def _fail(command: str, resp: httpx.Response) -> int:
    try:
        err = resp.json()["error"]
        detail = f"{err['type']}: {err['message']}"
    except (ValueError, KeyError, TypeError):
        detail = resp.text[:200]
    print(f"svc webhooks {command}: HTTP {resp.status_code} {detail}", file=sys.stderr)
    return 1


async def run(args: argparse.Namespace, headers: dict[str, str]) -> int:
    """One ``svc webhooks`` command against ``args.base_url``; ``headers`` carry the API key."""
    import httpx

    async with httpx.AsyncClient(base_url=args.base_url, headers=headers, timeout=30) as http:
        if args.webhooks_command == "signing-keys":
            resp = await http.get(
                "/v1/webhooks/signing-keys", params={"endpoint": args.endpoint} if args.endpoint else None
            )
            if resp.status_code != 200:
                return _fail("signing-keys", resp)
            for key in resp.json()["data"]:
                valid = f"until {key['expires']}" if key.get("expires") else "current"
                print(f"{key['endpoint']} {key['algorithm']} {key['publicKey']} ({valid})")
            return 0
        if args.webhooks_command in ("endpoints", "add"):
            return await endpoints.run(http, args, _fail)
        if args.webhooks_command == "events":
            return await _undelivered(http, args.undelivered_to)
        resp = await http.post(
            f"/v1/webhooks/endpoints/{args.endpoint}/recover",
            headers={"Idempotency-Key": f"svc-{uuid.uuid4()}"},
            json={"since": args.since, "dryRun": args.dry_run},
        )
        if resp.status_code != 200:
            return _fail("recover", resp)
        print(recover_line(args.endpoint, int(resp.json()["recovered"]), args.since, args.dry_run))
        return 0


async def _undelivered(http: httpx.AsyncClient, endpoint: str) -> int:
    """Every page of ``GET /v1/events?undeliveredTo=``: one line per event, newest first."""
    params = {"undeliveredTo": endpoint}
    while True:
        resp = await http.get("/v1/events", params=params)
        if resp.status_code != 200:
            return _fail("events", resp)
        page = resp.json()
        for event in page["data"]:
            print(f"{event['id']} {event['type']} {event.get('created', '')}".rstrip())
        if not page.get("nextPageToken"):
            return 0
        params["page_token"] = page["nextPageToken"]

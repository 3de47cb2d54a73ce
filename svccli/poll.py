"""``svc poll we_...``: a polling endpoint's consumer in a terminal (docs/webhooks.md "Polling").

Each batch's events are printed, one JSON object a line on stdout (pipe them into ``jq`` or a file), and
the batch is committed once printed; what it did goes to stderr. Without ``--follow`` it stops when nothing
is left; with it, it polls every ``--interval`` seconds until interrupted.

  svc poll we_... [--limit 100] [--lease-seconds 30] [--follow] [--interval 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import httpx


def add_parser(sub: Any) -> None:
    poll = sub.add_parser("poll", help="take a polling endpoint's events: print each batch, then commit it")
    poll.add_argument("endpoint", help="the polling endpoint (we_...)")
    poll.add_argument("--limit", type=int, default=100, help="events per batch, 1 to 500 (default 100)")
    poll.add_argument(
        "--lease-seconds", type=int, default=30, help="how long a batch is ours before it is offered again"
    )
    poll.add_argument("--follow", action="store_true", help="keep polling when nothing is left")
    poll.add_argument("--interval", type=float, default=2.0, help="seconds between polls that found nothing")


def _fail(resp: httpx.Response, what: str) -> int:
    try:
        err = resp.json()["error"]
        detail = f"{err['type']}: {err['message']}"
    except (ValueError, KeyError, TypeError):
        detail = resp.text[:200]
    print(f"svc poll: {what}: HTTP {resp.status_code} {detail}", file=sys.stderr)
    return 1


async def run(args: argparse.Namespace, headers: dict[str, str], out: TextIO | None = None) -> int:
    """Poll ``args.endpoint`` until nothing is left (or forever with ``--follow``); 0, or 1 on a refusal."""
    import asyncio

    import httpx

    out = out or sys.stdout
    path = f"/v1/webhooks/endpoints/{args.endpoint}/poll"
    params = {"limit": args.limit, "leaseSeconds": args.lease_seconds}
    total = 0
    async with httpx.AsyncClient(base_url=args.base_url, headers=headers, timeout=30) as http:
        while True:
            resp = await http.get(path, params=params)
            if resp.status_code != 200:
                return _fail(resp, "poll")
            batch = resp.json()
            if not batch["data"]:
                if not args.follow:
                    print(f"svc poll: {total} events committed; nothing left", file=sys.stderr)
                    return 0
                await asyncio.sleep(args.interval)
                continue
            for event in batch["data"]:
                out.write(json.dumps(event, separators=(",", ":")) + "\n")
            out.flush()
            done = await http.post(
                f"{path}/commit",
                headers={"Idempotency-Key": f"svc-{uuid.uuid4()}"},
                json={"cursor": batch["cursor"]},
            )
            if done.status_code != 200:
                return _fail(done, "commit")
            total += int(done.json()["committed"])
            print(f"svc poll: committed {len(batch['data'])} events ({batch['cursor']})", file=sys.stderr)

#!/usr/bin/env python3
"""A tiny /v1/stream client: prints every message the edge sends.

    python scripts/ws_example.py ws://127.0.0.1:8081/v1/stream <API_KEY> [--events ...] [--since evt_...]

The key travels in the subprotocol header (``Sec-WebSocket-Protocol: svc, <API_KEY>``), exactly as a
browser's ``new WebSocket(url, ["svc", key])`` sends it. Ctrl-C stops; close code 4001 means the key
was revoked or expired.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import websockets
from websockets.asyncio.client import connect


async def run(url: str, key: str, events: list[str], since: str) -> int:
    try:
        async with connect(url, subprotocols=["svc", key]) as ws:  # type: ignore[list-item]
            print(f"connected (subprotocol {ws.subprotocol})", file=sys.stderr)
            if events or since:
                await ws.send(json.dumps({"type": "subscribe", "events": events, "since": since}))
            async for raw in ws:
                print(raw, flush=True)
    except websockets.InvalidStatus as exc:
        body = exc.response.body.decode(errors="replace") if exc.response.body else ""
        print(f"refused: HTTP {exc.response.status_code} {body}", file=sys.stderr)
        return 1
    except websockets.ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd else None
        reason = exc.rcvd.reason if exc.rcvd else ""
        print(f"closed: {code} {reason}", file=sys.stderr)
        return 0 if code in (1000, None) else 2
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", help="e.g. ws://127.0.0.1:8081/v1/stream")
    parser.add_argument("key", help="the API key (svc_test_... on the sandbox host)")
    parser.add_argument(
        "--events", nargs="*", default=[], help="event kinds, e.g. booking.* ledger.low_balance"
    )
    parser.add_argument("--since", default="", help="resume after this event id (evt_...)")
    args = parser.parse_args()
    try:
        return asyncio.run(run(args.url, args.key, args.events, args.since))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

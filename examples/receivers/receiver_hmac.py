"""A webhook receiver with no library at all: ``X-Service-Signature`` checked by hand with hmac, as for
Stripe's header (the standard library only; Python 3.8 or later).

    PORT=3000 python receiver_hmac.py whsec_current... [whsec_previous...]

Prints ``verified: <event id> <type>`` (answers 204) or ``refused: <why>`` (answers 400) per delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRETS = sys.argv[1:]
TOLERANCE = 300  # seconds, either direction


def verified(raw_body: bytes, header: str, secrets: list[str], now: float) -> str:
    """ "" when the header verifies, else why not."""
    pairs = [part.strip().partition("=") for part in header.split(",")]
    stamps = [value for key, _, value in pairs if key == "t"]
    sigs = [value for key, _, value in pairs if key == "v1"]  # one per valid secret during a rotation
    if len(stamps) != 1 or not stamps[0].isdigit() or not sigs:
        return "X-Service-Signature is missing or malformed"
    t = stamps[0]
    matched = False
    for secret in secrets:
        # The key is the whole secret string, whsec_ included; the message "<t>." + the raw body.
        expected = hmac.new(secret.encode(), t.encode() + b"." + raw_body, hashlib.sha256).hexdigest()
        for sig in sigs:
            matched |= hmac.compare_digest(expected, sig)
    if not matched:
        return "no v1 signature matches"
    if abs(now - int(t)) > TOLERANCE:
        return "timestamp outside the tolerance"
    return ""


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # never parse and re-serialise
        problem = verified(raw, self.headers.get("X-Service-Signature", ""), SECRETS, time.time())
        if problem:
            print(f"refused: {problem}", flush=True)
            self.send_response(400)
            self.end_headers()
            return
        event = json.loads(raw)
        print(f"verified: {event['id']} {event['type']}", flush=True)
        self.send_response(204)
        self.end_headers()


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Hook).serve_forever()

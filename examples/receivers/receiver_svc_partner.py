"""A webhook receiver verifying with the partner package (``pip install svc-partner``): either signature
scheme, several secrets during a rotation, the 300 s tolerance.

    PORT=3000 python receiver_svc_partner.py whsec_current... [whsec_previous...]

Prints ``verified: <event id> <type>`` (answers 204) or ``refused: <why>`` (answers 400) per delivery.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from svc_partner import WebhookVerificationError, verify_delivery

SECRETS = sys.argv[1:]


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # the bytes as received
        try:
            delivery = verify_delivery(raw, dict(self.headers.items()), SECRETS)
        except WebhookVerificationError as exc:
            print(f"refused: {exc}", flush=True)
            self.send_response(400)
            self.end_headers()
            return
        event = json.loads(raw)
        # Store it first (deduplicate on delivery.event_id), then answer; process afterwards.
        print(f"verified: {delivery.event_id} {event['type']}", flush=True)
        self.send_response(204)
        self.end_headers()


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Hook).serve_forever()

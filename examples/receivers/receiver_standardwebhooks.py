"""A webhook receiver verifying the Standard Webhooks headers (an endpoint of signatureScheme
``standard`` or ``both``; ``svc listen --signature-scheme standard``) with the ``standardwebhooks``
library (``pip install standardwebhooks``).

    PORT=3000 python receiver_standardwebhooks.py whsec_current... [whsec_previous...]

Prints ``verified: <event id> <type>`` (answers 204) or ``refused: <why>`` (answers 400) per delivery.
"""

from __future__ import annotations

import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import standardwebhooks

# One Webhook per secret held: during a rotation a delivery verifies with either.
HOOKS = [standardwebhooks.Webhook(secret) for secret in sys.argv[1:]]


def verified(raw_body: bytes, headers: dict[str, str]) -> Any:
    """The event, or None when no secret verifies the delivery (signature and 5-minute window)."""
    for hook in HOOKS:
        try:
            return hook.verify(raw_body, headers)
        except standardwebhooks.WebhookVerificationError:
            continue
    return None


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # the bytes as received
        event = verified(raw, dict(self.headers.items()))
        if event is None:
            print("refused: no signing secret verifies the webhook-signature", flush=True)
            self.send_response(400)
            self.end_headers()
            return
        # webhook-id is the event id: the same on every retry, the deduplication key.
        print(f"verified: {self.headers['webhook-id']} {event['type']}", flush=True)
        self.send_response(204)
        self.end_headers()


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Hook).serve_forever()

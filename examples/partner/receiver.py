"""The reference partner's webhook receiver: the standard library only (Python 3.11), written from the
public webhook docs, and what a certification run's probes expect of a receiver.

    python -m examples.partner.receiver --port 3000 --secret whsec_... [--secret whsec_previous...]

- Verifies ``X-Service-Signature`` when present, else the Standard Webhooks ``webhook-*`` headers (an
  endpoint of scheme ``both`` sends both; either is enough), against the raw body, every secret held.
- Refuses a delivery whose signature does not match, or whose timestamp is more than five minutes from now,
  with 400 (a 4xx: the platform does not retry a refusal it caused by signing wrong, and a forger learns
  nothing).
- Processes each event id once: a delivery of an id already processed is answered 200 and not processed
  again (delivery is at least once). Everything verified is answered within milliseconds: the work a
  real receiver does goes to a queue.

Prints ``listening on <port>`` once ready, then one line per delivery: ``processed``, ``duplicate`` or
``refused: <why>``. The broken variants a certification run must catch, one flag each:
``--accept-wrong-signature``, ``--accept-stale-timestamp``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE = 300  # seconds, either direction


class Refused(Exception):
    pass


def _stripe(raw: bytes, header: str, secrets: list[str]) -> int:
    """The signed time of an ``X-Service-Signature`` (``t=<unix>,v1=<hex>[,v1=...]``) that matches."""
    pairs = [part.strip().partition("=") for part in header.split(",")]
    stamps = [value for key, _, value in pairs if key == "t"]
    sigs = [value for key, _, value in pairs if key == "v1"]
    if len(stamps) != 1 or not stamps[0].isdigit() or not sigs:
        raise Refused("X-Service-Signature is malformed")
    for secret in secrets:  # the key is the whole secret string; the message "<t>." + raw body
        expected = hmac.new(secret.encode(), stamps[0].encode() + b"." + raw, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(expected, sig) for sig in sigs):
            return int(stamps[0])
    raise Refused("no v1 signature matches")


def _standard(raw: bytes, msg_id: str, stamp: str, header: str, secrets: list[str]) -> int:
    """The signed time of Standard Webhooks headers that match (``v1,<base64>`` entries, space-separated;
    the key is the base64 after ``whsec_``, the message ``<id>.<timestamp>.`` + raw body)."""
    if not msg_id or not stamp.isdigit():
        raise Refused("webhook-id or webhook-timestamp is missing")
    sigs = [entry[3:] for entry in header.split() if entry.startswith("v1,")]
    for secret in secrets:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        mac = hmac.new(key, f"{msg_id}.{stamp}.".encode() + raw, hashlib.sha256).digest()
        expected = base64.b64encode(mac).decode()
        if any(hmac.compare_digest(expected, sig) for sig in sigs):
            return int(stamp)
    raise Refused("no v1 signature matches")


class Receiver:
    def __init__(self, secrets: list[str], accept_wrong_signature: bool, accept_stale: bool) -> None:
        self.secrets = secrets
        self.accept_wrong_signature = accept_wrong_signature
        self.accept_stale = accept_stale
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def verify(self, raw: bytes, headers: dict[str, str]) -> str:
        """The event id of a delivery that verifies; Refused otherwise."""
        try:
            if headers.get("x-service-signature"):
                signed = _stripe(raw, headers["x-service-signature"], self.secrets)
            elif headers.get("webhook-signature"):
                signed = _standard(
                    raw,
                    headers.get("webhook-id", ""),
                    headers.get("webhook-timestamp", ""),
                    headers["webhook-signature"],
                    self.secrets,
                )
            else:
                raise Refused("no signature header")
        except Refused:
            if not self.accept_wrong_signature:
                raise
            signed = int(headers.get("webhook-timestamp") or time.time())
        if abs(time.time() - signed) > TOLERANCE and not self.accept_stale:
            raise Refused("timestamp outside the tolerance")
        return str(json.loads(raw)["id"])

    def first_time(self, event_id: str) -> bool:
        with self.lock:
            if event_id in self.seen:
                return False
            self.seen.add(event_id)
            return True


def handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # never re-serialise
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                event_id = receiver.verify(raw, headers)
            except (Refused, ValueError, KeyError) as exc:
                print(f"refused: {exc}", flush=True)
                self.send_response(400)
                self.end_headers()
                return
            if receiver.first_time(event_id):
                print(f"processed: {event_id}", flush=True)
                self.send_response(204)
            else:
                print(f"duplicate: {event_id}", flush=True)
                self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # one line per delivery is ours
            pass

    return Hook


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The reference partner's webhook receiver")
    parser.add_argument("--port", type=int, default=3000, help="0: any free port (printed)")
    parser.add_argument(
        "--secret", action="append", required=True, help="signing secret; repeat in a rotation"
    )
    parser.add_argument("--accept-wrong-signature", action="store_true", help="broken variant")
    parser.add_argument("--accept-stale-timestamp", action="store_true", help="broken variant")
    args = parser.parse_args(argv)
    receiver = Receiver(args.secret, args.accept_wrong_signature, args.accept_stale_timestamp)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(receiver))
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

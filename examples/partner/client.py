"""The reference partner's API client: the standard library only (Python 3.11), written from the public
docs, and what a certification run's client checks expect.

    python -m examples.partner.client --base-url https://sandbox.example --api-key svc_test_... [--rounds 4]

Each round is the booking flow with the simulator: search hotels, read the first offer, book it, wait
until the booking is confirmed, cancel it. How it behaves:

- every POST carries an ``Idempotency-Key``, made once per operation, before the first attempt;
- a 503 or 504 (or no answer) is retried after a short backoff with the **same** key and the **same**
  body; a 429 waits ``Retry-After`` seconds first;
- a 401 stops at once (the key is wrong, revoked or expired: retrying cannot help), a 402
  ``search_quota_exhausted`` stops searching; other 4xx fail the operation.

Prints one line per request (``POST /v1/hotels/bookings -> 201``) and ``rounds completed: N``. The broken
variants a certification run must catch, one flag each: ``--no-key-on-retry``, ``--new-key-on-retry``,
``--ignore-retry-after``, ``--retry-401``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

RETRYABLE = (503, 504)
MAX_ATTEMPTS = 5
BACKOFF = 0.2  # seconds before retrying a 503/504


class Stop(Exception):
    """A failure retrying cannot fix (401, 402 search_quota_exhausted)."""


class Failed(Exception):
    """The operation failed (another 4xx); the next round may still work."""


class Client:
    def __init__(self, base_url: str, api_key: str, host: str, flags: argparse.Namespace) -> None:
        self.base = base_url.rstrip("/")
        self.key = api_key
        self.host = host
        self.flags = flags

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        idem = f"ref-{uuid.uuid4()}" if method == "POST" else ""
        for attempt in range(MAX_ATTEMPTS):
            headers = {"Authorization": f"Svc {self.key}", "Accept": "application/json"}
            if self.host:
                headers["Host"] = self.host
            if method == "POST":
                headers["Content-Type"] = "application/json"
                headers["X-Partner-Customer-Ref"] = "reference-partner-traveller"
                if attempt and self.flags.new_key_on_retry:
                    idem = f"ref-{uuid.uuid4()}"  # broken: a new key makes the retry a new booking
                if not (attempt and self.flags.no_key_on_retry):  # broken: the retry forgets the key
                    headers["Idempotency-Key"] = idem
            status, answer, retry_after = self._send(method, path, data, headers)
            print(f"{method} {path} -> {status}", flush=True)
            if 200 <= status < 300:
                return answer
            if status == 401:
                if self.flags.retry_401:  # broken: hammers a refused key
                    continue
                raise Stop("401: the API key is wrong, revoked or expired")
            if status == 402 and answer.get("error", {}).get("type") == "search_quota_exhausted":
                raise Stop("402: the daily search allowance is used up")
            if status == 429:
                time.sleep(0 if self.flags.ignore_retry_after else retry_after)
                continue
            if status in RETRYABLE or status == 0:
                time.sleep(BACKOFF * (attempt + 1))
                continue
            raise Failed(f"{status}: {answer.get('error', {}).get('type', '')}")
        raise Failed(f"{method} {path}: no success after {MAX_ATTEMPTS} attempts")

    def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], float]:
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}"), 0.0
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read() or b"{}")
            except ValueError:
                answer = {}
            return exc.code, answer, float(exc.headers.get("Retry-After") or 1)
        except (urllib.error.URLError, TimeoutError):
            return 0, {}, 0.0

    def round(self) -> None:
        offers = self.call("GET", "/v1/hotels/search?city=LIS&checkIn=2027-01-10&nights=2")["data"]
        offer = self.call("GET", f"/v1/hotels/offers/{offers[0]['id']}")
        booking = self.call("POST", "/v1/hotels/bookings", {"offer": offer["id"]})
        for _ in range(50):  # the booking is pending until the supplier confirms it
            if booking.get("state") != "pending":
                break
            time.sleep(0.1)
            booking = self.call("GET", f"/v1/hotels/bookings/{booking['id']}")
        self.call("POST", f"/v1/hotels/bookings/{booking['id']}/cancel", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The reference partner's API client")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--host", default="", help="a Host header (a sandbox reached by address)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--no-key-on-retry", action="store_true", help="broken variant")
    parser.add_argument("--new-key-on-retry", action="store_true", help="broken variant")
    parser.add_argument("--ignore-retry-after", action="store_true", help="broken variant")
    parser.add_argument("--retry-401", action="store_true", help="broken variant")
    args = parser.parse_args(argv)
    client = Client(args.base_url, args.api_key, args.host, args)
    done = 0
    for _ in range(args.rounds):
        try:
            client.round()
            done += 1
        except Failed as exc:
            print(f"round failed: {exc}", flush=True)
        except Stop as exc:
            print(f"stopped: {exc}", flush=True)
            break
    print(f"rounds completed: {done}", flush=True)
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())

"""OAuth2 client credentials (RFC 6749 section 4.4) for receivers that want a bearer token from their own
authorization server: the token fetched with the endpoint's client id and secret (HTTP Basic, section
2.3.1), kept until ``expires_in`` less ``MARGIN`` and shared by every send to the endpoint; when many sends
need it at once, one request fetches it (single flight). A 401 from the receiver drops the token it
refused, so the one retry of that attempt (``webhookd._sender``) gets a fresh one, fetched once however
many sends were refused with it.

A failure of the token endpoint is a failed attempt whose error says what went wrong (status, the OAuth2
``error`` code, an unreadable answer), never the secret or a token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlencode

import httpx

from webhookd._receiver_auth import OAuth2Credentials, ReceiverAuth

MARGIN = 30.0  # seconds before its expiry a token is no longer used
DEFAULT_LIFETIME = 300.0  # an answer without expires_in: kept this long
MAX_LIFETIME = 24 * 3600.0
MAX_TOKEN = 8192
TOKENS_KEPT = 4096
_ERROR_CODE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,64}$")  # RFC 6749 error: NQSCHAR

Fetch = Callable[[OAuth2Credentials], Awaitable[tuple[str, float]]]


class TokenError(Exception):
    """The token endpoint did not give a token; the message is safe for the attempt log."""


def _cache_key(auth: ReceiverAuth, creds: OAuth2Credentials) -> tuple[str, str]:
    """The endpoint and a digest of its credentials: new credentials are a new token."""
    parts = [creds.token_url, creds.client_id, creds.client_secret, creds.scope, creds.audience]
    return auth.endpoint_id, hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def token_request(creds: OAuth2Credentials) -> tuple[dict[str, str], bytes]:
    """The token request's headers and form body."""
    basic = f"{quote(creds.client_id, safe='')}:{quote(creds.client_secret, safe='')}"
    form = {"grant_type": "client_credentials"}
    if creds.scope:
        form["scope"] = creds.scope
    if creds.audience:
        form["audience"] = creds.audience
    headers = {
        "Authorization": "Basic " + base64.b64encode(basic.encode()).decode("ascii"),
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    return headers, urlencode(form).encode("ascii")


def read_answer(status: int, content: bytes) -> tuple[str, float]:
    """(access token, lifetime in seconds) from the token endpoint's answer; TokenError otherwise."""
    try:
        answer = json.loads(content)
    except ValueError:
        answer = None
    if status != 200:
        code = answer.get("error") if isinstance(answer, dict) else None
        said = f" (error {code})" if isinstance(code, str) and _ERROR_CODE.match(code) else ""
        raise TokenError(f"the OAuth2 token endpoint answered HTTP {status}{said}")
    if not isinstance(answer, dict):
        raise TokenError("the OAuth2 token endpoint's answer is not a JSON object")
    token = answer.get("access_token")
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN or not token.isprintable():
        raise TokenError("the OAuth2 token endpoint's answer has no usable access_token")
    kind = answer.get("token_type", "Bearer")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise TokenError("the OAuth2 token endpoint's token is not a bearer token")
    lifetime = answer.get("expires_in", DEFAULT_LIFETIME)
    if isinstance(lifetime, str) and lifetime.isdigit():
        lifetime = int(lifetime)
    if not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime <= 0:
        raise TokenError("the OAuth2 token endpoint's expires_in is not a positive number")
    return token, min(float(lifetime), MAX_LIFETIME)


def fetcher(client: httpx.AsyncClient, timeout: float) -> Fetch:
    """Token requests through webhookd's own client (the SSRF guard, the egress proxy)."""

    async def fetch(creds: OAuth2Credentials) -> tuple[str, float]:
        headers, body = token_request(creds)
        try:
            response = await client.post(creds.token_url, content=body, headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            raise TokenError(f"the OAuth2 token endpoint did not answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            # The transport's messages name the host, the SSRF guard's reason or the proxy: no secret.
            why = f"{type(exc).__name__}: {exc}"[:300]
            raise TokenError(f"the OAuth2 token endpoint could not be reached ({why})") from None
        return read_answer(response.status_code, response.content[:65536])

    return fetch


class Tokens:
    """The tokens of every endpoint with OAuth2 credentials (the ``kept`` most recently used)."""

    def __init__(self, fetch: Fetch, kept: int = TOKENS_KEPT, clock: Callable[[], float] = time.monotonic):
        self.fetch = fetch
        self.kept = kept
        self.clock = clock
        self._tokens: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()
        self._flights: dict[tuple[str, str], asyncio.Task[tuple[str, float]]] = {}
        self.fetched = 0

    async def token(self, auth: ReceiverAuth, refused: str = "") -> str:
        """The endpoint's token: the kept one while it is valid and not ``refused`` (the one a 401 came
        with), else a fresh one, fetched once for every caller waiting at the same time."""
        creds = auth.oauth2
        assert creds is not None
        key = _cache_key(auth, creds)
        kept = self._tokens.get(key)
        if kept is not None and kept[1] > self.clock() and kept[0] != refused:
            self._tokens.move_to_end(key)
            return kept[0]
        flight = self._flights.get(key)
        if flight is None:
            flight = self._flights[key] = asyncio.ensure_future(self._fetch(key, creds))
            flight.add_done_callback(lambda t: self._landed(key, t))
        # One caller's cancellation (its send timed out) leaves the fetch to the others.
        token, _ = await asyncio.shield(flight)
        return token

    def _landed(self, key: tuple[str, str], flight: asyncio.Task[tuple[str, float]]) -> None:
        self._flights.pop(key, None)
        if not flight.cancelled():
            flight.exception()  # retrieved: a failure every waiter gave up on is not "never retrieved"

    async def _fetch(self, key: tuple[str, str], creds: OAuth2Credentials) -> tuple[str, float]:
        self.fetched += 1
        token, lifetime = await self.fetch(creds)
        kept = self._tokens[key] = (token, self.clock() + max(0.0, lifetime - MARGIN))
        while len(self._tokens) > self.kept:
            self._tokens.popitem(last=False)
        return kept

"""The limits of ``/v1/stream`` (docs/edge.md "Stream limits"): pure rules, and the counts they read.

- Admission: an API key may hold ``stream_max_per_key`` open streams, an account (all its keys, both
  environments) ``stream_max_per_account`` (``EdgeConfig``; 0: no limit). One over is refused before the
  upgrade (429 ``rate_limited``); a handshake that raced another past the check is accepted then closed
  with ``CLOSE_RATE_LIMITED`` (4429).
- Opens: each account's new streams go through a token bucket (``stream_opens_per_second``, bursts of
  ``stream_open_burst``); one the bucket has no token for is refused before the upgrade (429
  ``rate_limited``). A stream flood of opens and closes (issue 20) never reaches the open-stream limits,
  yet each accepted stream costs a webhookd subscription.
- Messages: each connection's inbound messages go through a token bucket (``stream_messages_per_second``,
  bursts of ``stream_message_burst``); the first message the bucket has no token for closes the
  connection with 1008.

The counts are this edge process's own: several edges admit up to the limit each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The close code of a stream accepted over its limit (only when two handshakes raced past the check).
CLOSE_RATE_LIMITED = 4429
KEY = "key"
ACCOUNT = "account"
OPENS = "opens"
# Accounts whose open buckets are kept at most; past it, the buckets that have refilled are dropped.
MAX_OPEN_BUCKETS = 10_000


def admission(open_for_key: int, open_for_account: int, max_per_key: int, max_per_account: int) -> str | None:
    """May one more stream open? None: yes; else the limit that refuses it (``KEY`` or ``ACCOUNT``),
    the key's first. A maximum of 0 (or less) is no limit."""
    if max_per_key > 0 and open_for_key >= max_per_key:
        return KEY
    if max_per_account > 0 and open_for_account >= max_per_account:
        return ACCOUNT
    return None


def refusal_message(limit: str, maximum: int) -> str:
    """What the partner is told when ``limit`` (``KEY`` or ``ACCOUNT``) refuses a stream."""
    if limit == OPENS:
        return (
            f"this account opened streams faster than {maximum} a second; retry later "
            "(one stream receives every event of the account, and a reconnect may resume with since)"
        )
    whose = "this API key" if limit == KEY else "this account"
    return (
        f"{whose} already has {maximum} open streams, the most allowed; close one before opening another "
        "(one stream receives every event of the account: subscribe to the kinds you need)"
    )


@dataclass
class StreamSlots:
    """The open streams of this edge process by key id and by account id."""

    by_key: dict[str, int] = field(default_factory=dict)
    by_account: dict[str, int] = field(default_factory=dict)
    opens: dict[str, MessageBucket] = field(default_factory=dict)

    def may_open(self, account_id: str, now: float, rate: float, burst: int) -> bool:
        """Takes a token from the account's open bucket (False: none left)."""
        bucket = self.opens.get(account_id)
        if bucket is None:
            if len(self.opens) >= MAX_OPEN_BUCKETS:
                self.opens = {a: b for a, b in self.opens.items() if not b.full(now)}
            bucket = self.opens[account_id] = MessageBucket(rate, burst)
        return bucket.take(now)

    def refused(self, key_id: str, account_id: str, max_per_key: int, max_per_account: int) -> str | None:
        return admission(
            self.by_key.get(key_id, 0), self.by_account.get(account_id, 0), max_per_key, max_per_account
        )

    def acquire(self, key_id: str, account_id: str, max_per_key: int, max_per_account: int) -> str | None:
        """Take a slot (None) unless a limit refuses it (that limit, nothing taken)."""
        limit = self.refused(key_id, account_id, max_per_key, max_per_account)
        if limit is None:
            self.by_key[key_id] = self.by_key.get(key_id, 0) + 1
            self.by_account[account_id] = self.by_account.get(account_id, 0) + 1
        return limit

    def release(self, key_id: str, account_id: str) -> None:
        for counts, name in ((self.by_key, key_id), (self.by_account, account_id)):
            left = counts.get(name, 0) - 1
            if left > 0:
                counts[name] = left
            else:
                counts.pop(name, None)


def take_token(tokens: float, elapsed: float, rate: float, burst: float) -> tuple[bool, float]:
    """One message through a token bucket holding ``tokens``, ``elapsed`` seconds after the last: refilled
    at ``rate`` a second up to ``burst``, then one token taken if there is one. Returns (allowed, the
    tokens left). A rate of 0 (or less) is no limit."""
    if rate <= 0:
        return True, tokens
    tokens = min(float(burst), tokens + max(elapsed, 0.0) * rate)
    if tokens >= 1.0:
        return True, tokens - 1.0
    return False, tokens


@dataclass
class MessageBucket:
    """One connection's inbound messages (``take_token``); starts full."""

    rate: float
    burst: float
    tokens: float = -1.0
    last: float | None = None

    def take(self, now: float) -> bool:
        if self.last is None:
            self.tokens, self.last = float(self.burst), now
        allowed, self.tokens = take_token(self.tokens, now - self.last, self.rate, self.burst)
        self.last = now
        return allowed

    def full(self, now: float) -> bool:
        """Has it refilled (a new bucket would be the same)?"""
        last = now if self.last is None else self.last
        return self.rate <= 0 or self.tokens + (now - last) * self.rate >= self.burst

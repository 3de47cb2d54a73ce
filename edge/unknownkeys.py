"""A per-source budget of look-ups of keys authsvc does not know: pure, callers pass monotonic
microseconds.

A well-formed key (right prefix, valid CRC) the cache has never seen costs a call to authsvc and an
indexed read there. Made-up keys of valid CRC are cheap to produce, each misses the cache, and a flood of
them from one address would make authsvc slow for everyone, a partner's first use of a real key
included. So each source (the client's address) has a budget of unknown keys, a GCRA (edge.gcra) of
``rate`` a second with a burst of ``burst``: a look-up that turned out to be of an unknown key (a
denial without a key) is charged to its source, one whose answer named a key costs nothing. A source
past its budget is answered 429 rate_limited without asking authsvc until the budget refills; other
sources, and keys already cached, are not affected.

The table holds at most ``max_sources`` sources (least recently charged forgotten first: a forgotten one
starts again with a full budget, so the bound is on memory, never on correctness for the rest).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from edge.gcra import US, Limit, gcra

# Unknown keys a second per source, and how many at once (EdgeConfig.unknown_key_rate / _burst): far
# more than a partner mistyping keys, a small share of what one authsvc answers.
UNKNOWN_KEY_RATE = 20.0
UNKNOWN_KEY_BURST = 100
MAX_SOURCES = 100_000


@dataclass
class UnknownKeyBudget:
    rate: float = UNKNOWN_KEY_RATE
    burst: int = UNKNOWN_KEY_BURST
    max_sources: int = MAX_SOURCES
    _tats: OrderedDict[str, int] = field(default_factory=OrderedDict)

    @property
    def limit(self) -> Limit:
        period = max(1, round(US / self.rate))
        return Limit(period, period * max(1, self.burst))

    def wait(self, source: str, now: int) -> int:
        """Microseconds until ``source`` may have another unknown key looked up; 0: it may now."""
        verdict = gcra(self._tats.get(source), now, self.limit)
        return 0 if verdict.allowed else verdict.retry_after

    def charge(self, source: str, now: int) -> None:
        """``source`` had a key looked up that authsvc does not know."""
        verdict = gcra(self._tats.get(source), now, self.limit)
        if not verdict.allowed or verdict.tat is None:
            return  # already spent: a refused look-up is not made, so is never charged twice
        self._tats[source] = verdict.tat
        self._tats.move_to_end(source)
        while len(self._tats) > self.max_sources:
            self._tats.popitem(last=False)

    def __len__(self) -> int:
        return len(self._tats)

"""Which endpoints answer in time, as one worker process saw them (``webhookd._admission``'s probation)."""

from __future__ import annotations

import collections

from webhookd._admission import Key, answered_in_time


class Proven:
    """The endpoints whose last send in this process answered within ``slow_after``
    (``_admission.answered_in_time``), by "environment:account"; at most ``size``, the oldest forgotten
    (a forgotten endpoint is only back in probation until its next answer)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._account: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.by_account: dict[str, set[str]] = {}

    def __contains__(self, endpoint_id: str) -> bool:
        return endpoint_id in self._account

    def answered(self, key: Key, status: int | None, seconds: float, slow_after: float) -> None:
        """A send with ``key`` ended with HTTP ``status`` (None, 0: none) after ``seconds`` (-1: it went
        slow)."""
        self.record(key, seconds >= 0 and answered_in_time(status, seconds, slow_after))

    def record(self, key: Key, proven: bool) -> None:
        if not proven:
            self.forget(key.endpoint)
            return
        if key.endpoint in self._account:
            self._account.move_to_end(key.endpoint)
            return
        account = f"{key.env}:{key.account}"
        self._account[key.endpoint] = account
        self.by_account.setdefault(account, set()).add(key.endpoint)
        if len(self._account) > self.size:
            self.forget(next(iter(self._account)))

    def forget(self, endpoint_id: str) -> None:
        account = self._account.pop(endpoint_id, None)
        if account is not None:
            endpoints = self.by_account[account]
            endpoints.discard(endpoint_id)
            if not endpoints:
                del self.by_account[account]

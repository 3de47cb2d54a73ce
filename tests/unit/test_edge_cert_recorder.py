"""edge.certification.CertRecorder's flusher sleeps on its records, not on a timer: with nothing recorded it
never runs; a record is sent one FLUSH_INTERVAL later with the others of that span; records authsvc did
not take are kept and sent again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from edge import certification
from edge.authcache import Caller
from edge.certification import CertRecorder

CALLER = Caller("key_1", "acct_1", "sandbox", (), "active", cert_run_id="crt_1")


class Auth:
    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.sent: list[list[str]] = []

    async def record_certification_requests(self, request: Any) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("authsvc away")
        self.sent.append([r.request_id for r in request.requests])


def _record(recorder: CertRecorder, request_id: str) -> None:
    recorder.record(CALLER, request_id=request_id, method="GET", path="/v1/x", status=200, error_type="",
                    headers={}, body=None, received_at=1_800_000_000.0)  # fmt: skip


def _waits_on_a_record(recorder: CertRecorder) -> bool:
    assert recorder._task is not None
    awaiting = recorder._task.get_coro().cr_await  # type: ignore[union-attr]
    return getattr(awaiting, "__qualname__", "") == "Event.wait"


async def _until(check: Any) -> None:
    async with asyncio.timeout(10):
        while not check():  # noqa: ASYNC110 (what it waits for sets no event)
            await asyncio.sleep(0.001)


def test_idle_flusher_waits_on_a_record_and_retries_what_was_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(certification, "FLUSH_INTERVAL", 0.0)
    flushes = 0

    async def main() -> None:
        nonlocal flushes
        auth = Auth(fail=1)
        recorder = CertRecorder(auth)  # type: ignore[arg-type]
        flush = recorder.flush

        async def counted() -> None:
            nonlocal flushes
            flushes += 1
            await flush()

        recorder.flush = counted  # type: ignore[method-assign]
        recorder.start()
        await asyncio.sleep(0)
        assert _waits_on_a_record(recorder)  # nothing recorded: no timer, no wake-up
        assert flushes == 0
        _record(recorder, "req_1")
        _record(recorder, "req_2")
        await _until(lambda: auth.sent)
        assert auth.sent == [["req_1", "req_2"]]  # the first flush failed, the records were kept
        assert flushes == 2
        await _until(lambda: _waits_on_a_record(recorder))  # sent: idle again
        assert flushes == 2
        await recorder.stop()

    asyncio.run(main())

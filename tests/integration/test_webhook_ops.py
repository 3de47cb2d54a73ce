"""Operability: Prometheus metrics move with real deliveries; logs carry ids and never a signing secret."""

from __future__ import annotations

import asyncio
import logging
import ssl

import grpc
import pytest
import trustme
from prometheus_client import REGISTRY

from svckit.logs import JsonFormatter
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, run_server
from webhookd.testing import Receiver

LIVE = pb.ENVIRONMENT_LIVE


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def test_metrics_and_logs(sqlite_url: str, tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    receiver = Receiver(ctx, responder=lambda r: 500 if r.path == "/bad" else 200).start()
    app = await run_server(
        Config(database=sqlite_url, listen="127.0.0.1:0", policy=Policy(allow_private=True),
               ca_bundle=str(tmp_path / "ca.pem"), stats_interval=0.05)
    )  # fmt: skip
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
    caplog.set_level(logging.DEBUG, logger="webhookd")
    ok0 = _sample("webhook_attempts_total", {"outcome": "succeeded"})
    bad0 = _sample("webhook_attempts_total", {"outcome": "http_error"})
    lat0 = _sample("webhook_delivery_latency_seconds_count")
    try:
        secrets = []
        for path in ("/good", "/bad"):
            reg = await stub.RegisterEndpoint(
                pb.RegisterEndpointRequest(account_id="acct_ops", environment=LIVE, url=receiver.url(path),
                                           events=["ledger.low_balance"])
            )  # fmt: skip
            secrets.append(reg.signing_secret)
        pub = await stub.PublishEvent(
            pb.PublishEventRequest(
                account_id="acct_ops",
                environment=LIVE,
                type="ledger.low_balance",
                state="low_balance",
                data=event_data("ledger.low_balance"),
            )
        )
        await receiver.wait_for(2)
        for _ in range(300):
            if (
                _sample("webhook_queue_depth") == 1
                and _sample("webhook_attempts_total", {"outcome": "http_error"}) > bad0
            ):
                break
            await asyncio.sleep(0.02)
        assert _sample("webhook_attempts_total", {"outcome": "succeeded"}) == ok0 + 1
        assert _sample("webhook_attempts_total", {"outcome": "http_error"}) == bad0 + 1
        assert _sample("webhook_delivery_latency_seconds_count") == lat0 + 2
        assert _sample("webhook_queue_depth") == 1  # the failed one waits for its retry in 1 minute
        assert _sample("webhook_oldest_overdue_seconds") == 0
        failed = [r for r in caplog.records if r.getMessage() == "delivery attempt failed"]
        assert failed and failed[0].event_id == pub.event.id  # type: ignore[attr-defined]
        assert failed[0].endpoint_id.startswith("we_") and failed[0].delivery_id.startswith("msg_")  # type: ignore[attr-defined]
        formatter = JsonFormatter("webhookd")
        text = "\n".join(formatter.format(r) for r in caplog.records) + caplog.text
        assert "endpoint registered" in text and pub.event.id in text
        for secret in secrets:
            assert secret not in text and secret[6:] not in text
    finally:
        await channel.close()
        await app.stop(0)
        receiver.stop()

"""``svcctl ledger ...`` against a real authsvc over gRPC: every command, its audit records, bad input."""

from __future__ import annotations

from authsvc.testing import running_authsvc
from tests.integration.test_auth_cli import cli
from travel.auth.v1 import auth_pb2 as pb


async def test_every_ledger_command(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        t = f"127.0.0.1:{server.port}"
        code, acct, _ = await cli(t, "accounts", "create", "--name", "Credit Co")
        assert code == 0
        account = acct["account"]["id"]

        code, out, err = await cli(t, "ledger", "set-limit", account, "500000")
        assert code == 1 and "currency" in err and out is None  # the first limit names its currency
        code, out, _ = await cli(t, "ledger", "set-limit", account, "500000", "--currency", "EUR")
        assert code == 0 and out["ledger"]["credit_limit"] == "500000" and out["ledger"]["currency"] == "EUR"
        code, out, _ = await cli(
            t, "ledger", "add-credit", account, "2500", "--reference", "pay_1", "--note", "wire"
        )
        assert code == 0 and out["entry"]["kind"] == "LEDGER_ENTRY_KIND_CREDIT"
        again = (await cli(t, "ledger", "add-credit", account, "2500", "--reference", "pay_1"))[1]
        assert again["replayed"] is True
        code, out, _ = await cli(t, "ledger", "set-warning", account, "100000")
        assert code == 0 and out["ledger"]["warning_level"] == "100000"
        code, out, _ = await cli(t, "ledger", "set-warning", account, "default")
        assert out["ledger"]["warning_level"] == "50000" and out["ledger"]["warning_level_default"] is True

        await stub.PlaceCreditHold(
            pb.PlaceCreditHoldRequest(
                account_id=account,
                environment=pb.ENVIRONMENT_LIVE,
                booking_ref="bk_1",
                amount=1000,
                currency="EUR",
            )
        )
        code, out, _ = await cli(t, "ledger", "show", account, "--entries", "2")
        assert code == 0
        assert (out["ledger"]["held"], out["ledger"]["available"]) == ("1000", str(500000 + 2500 - 1000))
        assert [e["kind"] for e in out["entries"]] == [
            "LEDGER_ENTRY_KIND_HOLD",
            "LEDGER_ENTRY_KIND_WARNING_LEVEL",
        ]
        assert out["next_page_token"]
        assert set((await cli(t, "ledger", "show", account))[1]) == {"ledger"}

        # Every operator change is audited with the acting operator.
        _, audit, _ = await cli(t, "audit", "list", "--account", account)
        ledger_events = [e for e in audit["events"] if e["action"].startswith("ledger.")]
        assert [e["action"] for e in ledger_events] == [
            "ledger.limit_set",
            "ledger.credit_added",
            "ledger.warning_level_set",
            "ledger.warning_level_set",
        ]
        assert {e["actor"]["user"] for e in ledger_events} == {"ops:cli-test"}

        # Bad input: a clear error, nothing changed.
        code, _, err = await cli(t, "ledger", "set-limit", account, "100", "--currency", "USD")
        assert code == 1 and "EUR" in err
        code, _, err = await cli(t, "ledger", "add-credit", account, "0", "--reference", "pay_2")
        assert code == 1 and "amount" in err
        code, _, err = await cli(t, "ledger", "show", "acct_unknown0000")
        assert code == 1 and "not_found" in err
        assert (await cli(t, "ledger", "show", account))[1]["ledger"]["credit_limit"] == "500000"

"""svcctl's auth commands against a real authsvc over gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from typing import Any

import pytest

from authsvc._keys import environment_of
from authsvc.testing import running_authsvc
from svcctl.__main__ import main
from svcctl.client import create_demo_key


async def cli(target: str, *argv: str) -> tuple[int, Any, str]:
    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--authsvc", target, "--insecure-dev", "--actor", "ops:cli-test", *argv])
        return code, out.getvalue(), err.getvalue()

    code, out, err = await asyncio.to_thread(run)
    return code, json.loads(out) if out.strip() else None, err


async def test_every_auth_command(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, _stub):
        t = f"127.0.0.1:{server.port}"
        code, acct, _ = await cli(
            t,
            "accounts",
            "create",
            "--name",
            "Acme",
            "--admin-email",
            "ops@acme.example",
            "--daily-search-allowance",
            "5",
        )
        assert code == 0
        account_id = acct["account"]["id"]
        assert (await cli(t, "accounts", "get", account_id))[1]["account"]["name"] == "Acme"
        _, created, _ = await cli(
            t,
            "keys",
            "create",
            "--account",
            account_id,
            "--environment",
            "live",
            "--name",
            "checkout",
            "--scope",
            "hotels:read",
            "--allow",
            "192.0.2.0/24",
            "--rate-limit",
            "40",
        )
        assert environment_of(created["secret"]) == "live"
        assert created["key"]["rate_limit"] == 40
        key_id = created["key"]["id"]
        assert (await cli(t, "keys", "get", key_id))[1]["key"]["allowed_sources"] == ["192.0.2.0/24"]
        _, updated, _ = await cli(
            t, "keys", "update", key_id, "--scope", "hotels:read", "--scope", "esim:read", "--clear-allow"
        )
        assert updated["key"]["scopes"] == ["hotels:read", "esim:read"]
        assert "allowed_sources" not in updated["key"]
        assert updated["key"]["rate_limit"] == 40  # untouched unless named
        _, limited, _ = await cli(t, "keys", "update", key_id, "--rate-limit", "0")
        assert "rate_limit" not in limited["key"]  # 0: back to the environment's default
        _, rotated, _ = await cli(t, "keys", "rotate", key_id, "--grace", "30m")
        assert (
            rotated["old_key"]["status"] == "KEY_STATUS_EXPIRING" and rotated["secret"] != created["secret"]
        )
        _, revoked, _ = await cli(t, "keys", "revoke", rotated["new_key"]["id"], "--reason", "test")
        assert revoked["key"]["status"] == "KEY_STATUS_REVOKED"
        _, listed, _ = await cli(
            t, "keys", "list", "--account", account_id, "--include-revoked", "--all", "--page-size", "1"
        )
        assert len(listed["keys"]) == 2
        _, audit, _ = await cli(t, "audit", "list", "--account", account_id)
        assert [e["action"] for e in audit["events"]] == [
            "account.created",
            "key.created",
            "key.updated",
            "key.updated",
            "key.rotated",
            "key.created",
            "key.revoked",
        ]
        assert {e["actor"]["user"] for e in audit["events"]} == {"ops:cli-test"}
        _, trv, _ = await cli(
            t, "travellers", "resolve", "--account", account_id, "--environment", "live", "c-1"
        )
        _, gone, _ = await cli(
            t, "travellers", "delete", "--account", account_id, "--environment", "live", "c-1"
        )
        assert trv["traveller_id"] == gone["traveller_id"]
        _, used, _ = await cli(
            t, "usage", "consume", "--account", account_id, "--environment", "live", "--count", "2"
        )
        assert used["counted"] is True
        assert (await cli(t, "usage", "get", "--account", account_id))[1]["usage"]["searches_used"] == "2"
        _, status, _ = await cli(t, "accounts", "set-status", account_id, "read_only")
        assert status["account"]["status"] == "ACCOUNT_STATUS_READ_ONLY"
        code, out, err = await cli(
            t, "keys", "create", "--account", account_id, "--environment", "live", "--scope", "hotels:destroy"
        )
        assert code == 1 and out is None and "invalid_request" in err and "hotels:destroy" in err
        code, _, err = await cli(
            t, "travellers", "resolve", "--account", account_id, "--environment", "live", "a@b.example"
        )
        assert code == 1 and "invalid_customer_ref" in err

        demo = await create_demo_key(t, None)
        assert environment_of(demo["secret"]) == "sandbox"
        _, key, _ = await cli(t, "keys", "get", demo["key_id"])
        assert len(key["key"]["scopes"]) == 10 and key["key"]["account_id"] == demo["account_id"]
        # A restart of scripts/run rotates the demo key with a day's overlap: `svc listen` keeps working.
        again = await create_demo_key(t, None, account_id=demo["account_id"], replaces=demo["key_id"])
        assert again["key_id"] != demo["key_id"] and again["secret"] != demo["secret"]
        _, old, _ = await cli(t, "keys", "get", demo["key_id"])
        assert old["key"]["status"] == "KEY_STATUS_EXPIRING"


async def test_certification_gate_commands(sqlite_url: str) -> None:
    """svcctl accounts require-certification / certify --override: a live key refused until certified,
    the override audited with its reason and the operator."""
    async with running_authsvc(sqlite_url) as (server, _stub):
        t = f"127.0.0.1:{server.port}"
        _, acct, _ = await cli(t, "accounts", "create", "--name", "Gated")
        account_id = acct["account"]["id"]
        _, required, _ = await cli(t, "accounts", "require-certification", account_id, "on")
        assert required["account"]["require_certification"] is True
        live = ("keys", "create", "--account", account_id, "--environment", "live", "--scope", "hotels:read")
        code, out, err = await cli(t, *live)
        assert code == 1 and out is None and "certification_required" in err
        with pytest.raises(SystemExit):  # argparse: --override is required
            await cli(t, "accounts", "certify", account_id, "--reason", "phone call")
        _, certified, _ = await cli(
            t, "accounts", "certify", account_id, "--override", "--reason", "certified by phone"
        )
        assert "certified_at" in certified["account"]["certification"]
        code, created, _ = await cli(t, *live)
        assert code == 0 and created["key"]["environment"] == "ENVIRONMENT_LIVE"
        _, audit, _ = await cli(t, "audit", "list", "--account", account_id)
        overrides = [e for e in audit["events"] if e["action"] == "account.certified"]
        assert len(overrides) == 1
        assert overrides[0]["after"]["reason"] == "override: certified by phone"
        assert overrides[0]["actor"]["user"] == "ops:cli-test"

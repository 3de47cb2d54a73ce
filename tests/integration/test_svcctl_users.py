"""``svcctl users invite``: an operator invites a portal user through authsvc's CreateInvite; the link it
prints opens the invite (AcceptInvite takes its token), and the token is in no log line."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from typing import Any

import grpc
import pytest

from authsvc.testing import running_authsvc
from svcctl.__main__ import main
from travel.auth.v1 import identity_pb2, identity_pb2_grpc


async def cli(target: str, *argv: str) -> tuple[int, Any, str]:
    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(
                ["--authsvc", target, "--insecure-dev", "--portal-url", "https://portal.example/", *argv]
            )
        return code, out.getvalue(), err.getvalue()

    code, out, err = await asyncio.to_thread(run)
    return code, json.loads(out) if out.strip() else None, err


async def test_invite_prints_a_working_link_and_logs_no_token(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_authsvc(sqlite_url) as (server, _stub):
        t = f"127.0.0.1:{server.port}"
        code, acct, _ = await cli(t, "accounts", "create", "--name", "Invited Travel")
        assert code == 0
        account_id = acct["account"]["id"]
        code, out, err = await cli(
            t,
            "users",
            "invite",
            "--account",
            account_id,
            "--role",
            "owner",
            "--email",
            "owner@invited.example",
        )
        assert code == 0, err
        assert out["invite"]["email"] == "owner@invited.example"
        assert out["invite"]["role"] == "USER_ROLE_OWNER"
        prefix = "https://portal.example/invite/"
        assert out["link"].startswith(prefix)
        token = out["link"][len(prefix) :]
        assert len(token) >= 20 and "token" not in out["invite"]
        async with grpc.aio.insecure_channel(t) as channel:
            accepted = await identity_pb2_grpc.IdentityServiceStub(channel).AcceptInvite(
                identity_pb2.AcceptInviteRequest(token=token, password="a long enough passphrase 42")
            )
        assert accepted.user.email == "owner@invited.example"
        assert token not in err and token not in caplog.text

        code, _, err = await cli(
            t,
            "users",
            "invite",
            "--account",
            "acct_missing",
            "--role",
            "viewer",
            "--email",
            "x@invited.example",
        )
        assert code == 1 and err.startswith("error: ")


def test_a_role_outside_the_table_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["users", "invite", "--account", "acct_x", "--role", "root", "--email", "a@b.example"])
    assert exc.value.code == 2 and "invalid choice: 'root'" in capsys.readouterr().err

"""svcctl's clients of authsvc and webhookd (svckit.clients), what every command module shares (printing an
answer, the argument types), and a helper for scripts."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from svckit.clients import AuthClient, ClientError, HooksClient
from svckit.scopes import ALL_SCOPES
from svckit.tls import Tls
from svckit.tlsflags import tls_from_args
from travel.auth.v1 import auth_pb2 as pb

DEMO_ACTOR = "svc:run_stack"
# The previous demo key keeps working this long after a restart hands out a new one, so a running
# `svc listen` (or any script holding it) carries on: authsvc's default overlap for a rotation.
DEMO_OVERLAP = Duration(seconds=24 * 3600)
# An operator's command may wait on a busy service longer than a partner request would.
TIMEOUT = 30.0
INT32_MAX = 2**31 - 1


def print_message(message: Message, indent: int | None = 2) -> None:
    """An answer as the commands print it: the proto as JSON, field names as in the proto."""
    print(
        json.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True), indent=indent),
        flush=True,
    )


def duration(text: str) -> Duration:
    """An argparse type: ``90``, ``90s``, ``30m``, ``24h`` or ``7d``."""
    m = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 30m, 24h, 7d)")
    return Duration(seconds=int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)])


def count(text: str) -> int:
    """An argparse type: a whole number a proto's int32 field holds, 0 to 2,147,483,647, in ASCII digits
    (issue 34: a larger one ended in a traceback where the request was built)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= INT32_MAX):
        raise argparse.ArgumentTypeError(f"a whole number from 0 to {INT32_MAX:,}, not {text!r}")
    return int(text)


def auth_client(args: argparse.Namespace) -> AuthClient:
    """authsvc at ``--authsvc``, with svcctl's certificate (or plaintext with --insecure-dev)."""
    return AuthClient(args.authsvc, tls_from_args(args), timeout=TIMEOUT)


def hooks_client(args: argparse.Namespace) -> HooksClient:
    """webhookd at ``--webhookd``, with svcctl's certificate (or plaintext with --insecure-dev)."""
    return HooksClient(args.webhookd, tls_from_args(args), timeout=TIMEOUT)


async def create_demo_key(
    authsvc_target: str, tls: Tls | None, account_id: str = "", replaces: str = ""
) -> dict[str, Any]:
    """A sandbox key with every scope for the account "Demo Partner", as svcctl (``tls``): the account is
    created unless ``account_id`` names it, and the key ``replaces`` (the previous demo key) is rotated
    with a 24 h overlap when it still can be, so each run hands out a fresh secret without keeping one
    and what still uses the previous one keeps working for a day.

    Returns ``{"account_id", "key_id", "secret"}``; the secret is shown only here.
    """
    async with AuthClient(authsvc_target, tls, timeout=TIMEOUT) as auth:
        actor = pb.Actor(user=DEMO_ACTOR)
        if not account_id:
            account_id = (
                await auth.create_account(
                    pb.CreateAccountRequest(name="Demo Partner", mode=pb.ACCOUNT_MODE_A, actor=actor),
                    wait_for_ready=True,
                )
            ).account.id
        if replaces:
            try:
                rolled = await auth.rotate_key(
                    pb.RotateKeyRequest(key_id=replaces, grace_period=DEMO_OVERLAP, actor=actor),
                    wait_for_ready=True,
                )
                return {"account_id": account_id, "key_id": rolled.new_key.id, "secret": rolled.secret}
            except ClientError:
                pass  # revoked, gone or already rotated out meanwhile: a new key instead
        created = await auth.create_key(
            pb.CreateKeyRequest(
                account_id=account_id,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="demo sandbox key",
                scopes=list(ALL_SCOPES),
                actor=actor,
            ),
            wait_for_ready=True,
        )
    return {"account_id": account_id, "key_id": created.key.id, "secret": created.secret}

"""The API key from an Authorization header or a stream's subprotocols (edge.credentials), by table."""

from __future__ import annotations

import pytest

from edge.credentials import key_from_authorization, stream_credential
from tests.unit.edge_keys import BAD_CHECKSUM, KEY, LIVE_KEY, error_type


# -- credentials -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"Svc {KEY}", KEY),
        (f"svc {KEY}", KEY),
        (f"SVC   {KEY}  ", KEY),
        (f"Bearer {KEY}", KEY),
        (f"bearer {LIVE_KEY}", LIVE_KEY),
    ],
)
def test_authorization_header_ok(header: str, expected: str) -> None:
    assert key_from_authorization(header) == expected


@pytest.mark.parametrize(
    ("header", "etype"),
    [
        (None, "missing_api_key"),
        ("", "missing_api_key"),
        ("   ", "missing_api_key"),
        ("Svc", "missing_api_key"),
        ("Svc   ", "missing_api_key"),
        (f"Basic {KEY}", "invalid_api_key"),
        (KEY, "invalid_api_key"),
        ("Svc sk_live_abc", "invalid_api_key"),
        ("Svc svc_test_short", "invalid_api_key"),
        ("Svc svc_test_" + "a" * 30 + "!", "invalid_api_key"),
        # Well-shaped but the checksum does not match: refused here, authsvc is never asked.
        (f"Svc {BAD_CHECKSUM}", "invalid_api_key"),
        ("Svc svc_test_" + "A" * 38, "invalid_api_key"),
        (f"Svc {KEY}x", "invalid_api_key"),
        (f"Svc {KEY[:-1]}", "invalid_api_key"),
        (f"Svc {KEY.replace('svc_test_', 'svc_TEST_')}", "invalid_api_key"),
        (f"Svc {KEY} extra", "invalid_api_key"),
    ],
)
def test_authorization_header_refused(header: str | None, etype: str) -> None:
    assert error_type(key_from_authorization, header) == etype


@pytest.mark.parametrize(
    ("lines", "authorization", "expected"),
    [
        ([f"svc, {KEY}"], None, (KEY, "svc")),
        ([f"SVC,{KEY}"], None, (KEY, "SVC")),  # any case; the answer spells it as the client did
        ([f" Svc ,  {KEY} "], f"Svc {LIVE_KEY}", (KEY, "Svc")),  # the subprotocol wins
        (["svc", KEY], None, (KEY, "svc")),  # two field lines are one list, as the handshake reads them
        ([], f"Svc {KEY}", (KEY, None)),  # a server client: no subprotocol, none selected
        ([""], f"Bearer {KEY}", (KEY, None)),
        (["sVc"], f"Svc {KEY}", (KEY, "sVc")),  # "svc" alone: the key from Authorization
    ],
)
def test_stream_credential_ok(
    lines: list[str], authorization: str | None, expected: tuple[str, str | None]
) -> None:
    assert stream_credential(lines, authorization) == expected


@pytest.mark.parametrize(
    ("lines", "authorization", "etype"),
    [
        ([], None, "missing_api_key"),
        (["svc"], None, "missing_api_key"),
        (["svc"], "Svc", "missing_api_key"),
        (["chat"], f"Svc {KEY}", "invalid_request"),
        ([f"{KEY}, svc"], None, "invalid_request"),
        ([f"svc, {KEY}, other"], None, "invalid_request"),
        (["svc", KEY, "other"], None, "invalid_request"),
        (["svc, not-a-key"], None, "invalid_api_key"),
        ([f"svc, {BAD_CHECKSUM}"], None, "invalid_api_key"),
        ([], f"Svc {BAD_CHECKSUM}", "invalid_api_key"),
    ],
)
def test_stream_credential_refused(lines: list[str], authorization: str | None, etype: str) -> None:
    assert error_type(stream_credential, lines, authorization) == etype

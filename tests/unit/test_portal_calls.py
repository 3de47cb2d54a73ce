"""The portal's certificate acts only for its signed-in user (svckit.portal_calls.refusal), by table."""

from __future__ import annotations

import pytest

from svckit.portal_calls import PORTAL_CALLS, PortalUser, Refusal, needs_session, refusal

AUTH = "/travel.auth.v1.AuthService/"
IDENTITY = "/travel.auth.v1.IdentityService/"
HOOKS = "/travel.webhooks.v1.WebhookService/"

OWNER = PortalUser("acct_a", "usr_1", "o@a.example", "owner", "ses_1")
VIEWER = PortalUser("acct_a", "usr_2", "v@a.example", "viewer", "ses_2")
DEVELOPER = PortalUser("acct_a", "usr_3", "d@a.example", "developer", "ses_3")

CASES: list[tuple[str, PortalUser | None, dict[str, str], str | None]] = [
    # (method, the session's user, the request's account_id/session_token and the call's token, refusal)
    (IDENTITY + "SignIn", None, {}, None),
    (IDENTITY + "AcceptInvite", None, {}, None),
    (IDENTITY + "GetSession", None, {"session_token": "ps_x"}, None),
    (IDENTITY + "SignOut", None, {"session_token": "ps_x"}, None),
    # No session: nothing but the sign-in flows.
    (IDENTITY + "CreateInvite", None, {"account_id": "acct_a"}, "session_expired"),
    (IDENTITY + "RecordAuditEvent", None, {"account_id": "acct_a"}, "session_expired"),
    (AUTH + "CreateKey", None, {"account_id": "acct_a"}, "session_expired"),
    (HOOKS + "RegisterEndpoint", None, {"account_id": "acct_a"}, "session_expired"),
    # Another account than the session's.
    (AUTH + "CreateKey", OWNER, {"account_id": "acct_b"}, "forbidden"),
    (AUTH + "ListKeys", OWNER, {"account_id": "acct_b"}, "forbidden"),
    (IDENTITY + "CreateInvite", OWNER, {"account_id": "acct_b"}, "forbidden"),
    (IDENTITY + "RecordAuditEvent", OWNER, {"account_id": "acct_b"}, "forbidden"),
    (HOOKS + "ListEndpoints", OWNER, {"account_id": "acct_b"}, "forbidden"),
    (AUTH + "CreateKey", OWNER, {"account_id": "acct_a"}, None),
    # Left empty: the server takes the session's (identity) or refuses it as invalid (the rest).
    (IDENTITY + "CreateInvite", OWNER, {"account_id": ""}, None),
    # The request's own session token must be the call's.
    (IDENTITY + "ChangePassword", OWNER, {"session_token": "ps_other", "token": "ps_1"}, "forbidden"),
    (IDENTITY + "ChangePassword", OWNER, {"session_token": "ps_1", "token": "ps_1"}, None),
    # The role of the session's user.
    (AUTH + "CreateKey", VIEWER, {"account_id": "acct_a"}, "forbidden"),
    (AUTH + "RevokeKey", DEVELOPER, {}, "forbidden"),
    (AUTH + "GetKey", VIEWER, {}, None),
    (AUTH + "UpdateAccount", DEVELOPER, {"account_id": "acct_a"}, "forbidden"),
    (HOOKS + "RegisterEndpoint", VIEWER, {"account_id": "acct_a"}, "forbidden"),
    (HOOKS + "RegisterEndpoint", DEVELOPER, {"account_id": "acct_a"}, None),
    (HOOKS + "ListEndpoints", VIEWER, {"account_id": "acct_a"}, None),
    # Inviting: the identity service checks the role against the invited role itself.
    (IDENTITY + "CreateInvite", VIEWER, {}, None),
    # Not the portal's: refused whoever is signed in.
    (HOOKS + "PublishEvent", OWNER, {"account_id": "acct_a"}, "forbidden"),
    (AUTH + "CreateAccount", OWNER, {}, "forbidden"),
]


@pytest.mark.parametrize(("method", "user", "request_fields", "expected"), CASES)
def test_refusal(
    method: str, user: PortalUser | None, request_fields: dict[str, str], expected: str | None
) -> None:
    got = refusal(
        method,
        user,
        account_id=request_fields.get("account_id"),
        session_token=request_fields.get("session_token", ""),
        token=request_fields.get("token", ""),
    )
    assert (got.type if isinstance(got, Refusal) else None) == expected, got


def test_only_the_sign_in_flows_go_without_a_session() -> None:
    free = {m for m in PORTAL_CALLS if not needs_session(m)}
    assert {m.rsplit("/", 1)[1] for m in free} == {"SignIn", "AcceptInvite", "GetSession", "SignOut"}
    assert needs_session(AUTH + "SomethingNew")

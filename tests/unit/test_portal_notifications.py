"""The Notifications page's one decision: adding or removing an extra alert address (by table)."""

from __future__ import annotations

import pytest

from portal.routes.notifications import MAX_EXTRA, Change, extra_change

OWNER = ["owner@p.example"]


@pytest.mark.parametrize(
    ("extra", "change", "typed", "addresses", "notice", "problem"),
    [
        ([], "add", "ops@p.example", ["ops@p.example"], "ops@p.example now receives alert e-mails.", ""),
        (["a@p.example"], "add", "  b@p.example ", ["a@p.example", "b@p.example"],
         "b@p.example now receives alert e-mails.", ""),
        ([], "add", "", [], "", "enter an e-mail address"),
        ([], "add", "   ", [], "", "enter an e-mail address"),
        ([], "add", "not-an-address", [], "", "not-an-address is not an e-mail address"),
        ([], "add", "a b@p.example", [], "", "a b@p.example is not an e-mail address"),
        ([], "add", "x@" + "p" * 260 + ".example", [], "", "is not an e-mail address"),
        (["Ops@p.example"], "add", "ops@P.example", [], "", "Ops@p.example already receives alert e-mails"),
        ([], "add", "OWNER@p.example", [], "", "already receives alert e-mails as a portal owner or admin"),
        ([f"x{i}@p.example" for i in range(MAX_EXTRA)], "add", "y@p.example", [], "",
         f"at most {MAX_EXTRA} extra addresses; remove one first"),
        (["a@p.example", "Ops@p.example"], "remove", "ops@p.example", ["a@p.example"],
         "Ops@p.example no longer receives alert e-mails.", ""),
        (["a@p.example"], "remove", "b@p.example", [], "", "b@p.example is not one of the extra addresses"),
        # An owner's own address is not an extra address: the Users page changes who the owners are.
        (["a@p.example"], "remove", "owner@p.example", [], "", "is not one of the extra addresses"),
    ],
)  # fmt: skip
def test_extra_change(
    extra: list[str], change: Change, typed: str, addresses: list[str], notice: str, problem: str
) -> None:
    got = extra_change(extra, OWNER, change, typed)
    assert list(got.addresses) == addresses and got.notice == notice
    assert problem in got.problem and bool(got.problem) is bool(problem)

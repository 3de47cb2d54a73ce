"""Whether an account may create a key yet: one pure rule (no I/O).

An account whose operator set ``require_certification`` may create live keys only once it is certified
(``certified_at``: a certification run's report passed, or an operator overrode it with a reason). Why
only creation: the gate is about getting production access in the first place; live keys that already
exist (made before the requirement was set) keep working, and rotating one replaces it rather than adding
access, so neither is refused. Sandbox keys are never gated: certifying needs them.
"""

from __future__ import annotations

from authsvc._model import Account
from svckit.vocabulary import Environment

MISSING_MESSAGE = (
    "live keys for this account need a passing certification report: run a certification in the "
    "sandbox (svc certify start, or the portal's Go-live checklist) and pass every check"
)


def creation_refusal(account: Account, environment: Environment) -> str:
    """Why a key of ``environment`` may not be created for ``account`` now ("" when it may)."""
    if environment != Environment.LIVE or not account.require_certification:
        return ""
    if account.certified_at is not None:
        return ""
    return MISSING_MESSAGE

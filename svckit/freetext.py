"""Free text a person types (names, descriptions, reasons): what every service refuses in it.

A pasted API key or signing secret in a free-text field would be stored, listed, audited and sent in
events, so it is refused (400 invalid_request) wherever such a field is accepted, with the same pattern the
log filter redacts (``svckit.logs.SECRET_PATTERN``). Control characters are refused too: free text is
shown in portals, e-mails and terminals.
"""

from __future__ import annotations

from svckit.logs import SECRET_PATTERN


def contains_secret(value: str) -> bool:
    """True when ``value`` holds something shaped like an API key (svc_live_/svc_test_) or a signing
    secret (whsec_)."""
    return SECRET_PATTERN.search(value) is not None


def free_text_problem(value: str, *, max_len: int) -> str | None:
    """What is wrong with free text ``value`` (the end of an error message naming the field), or None."""
    if len(value) > max_len:
        return f"at most {max_len} characters"
    return content_problem(value)


def content_problem(value: str) -> str | None:
    """``free_text_problem`` without the length bound (for text whose length another rule bounds)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "control characters are not allowed"
    if contains_secret(value):
        # Keeps a pasted secret out of the database, listings, the audit trail and events.
        return "must not contain an API key or signing secret"
    return None

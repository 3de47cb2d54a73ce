"""What RecordAuditEvent takes into the audit trail from another service, and what it refuses. Pure.

authsvc writes key and user records itself, in the transaction of the change; RecordAuditEvent is for
operations another service performs (webhook endpoints live in webhookd) on behalf of a portal user or
an operator. So its actions are a closed list (a caller cannot write a ``key.revoked`` that never
happened), each with the portal role action (svckit.roles) the signed-in user must hold, and the
record's details are checked for secrets as everything else is: no field named like one (secret,
password, token, seed, api key) and no value shaped like an API key or a signing secret
(svckit.freetext.contains_secret), at most 8 KiB of JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from svckit import roles
from svckit.freetext import contains_secret

RECORDED_ACTIONS: dict[str, roles.Action] = {
    "webhook_endpoint.created": "webhooks.write",
    "webhook_endpoint.updated": "webhooks.write",
    "webhook_endpoint.deleted": "webhooks.write",
    "webhook_endpoint.secret_rotated": "webhooks.write",
    "webhook_endpoint.enabled": "webhooks.write",
    "webhook_endpoint.recovered": "webhooks.write",
    "webhook_endpoint.test_sent": "webhooks.write",
    "webhook_attempt.resent": "webhooks.write",
}
MAX_DETAILS_BYTES = 8192
_SECRET_NAME = re.compile(r"secret|password|passphrase|token|seed|api_?key|credential", re.I)


def _secret_in(value: Any, path: str) -> str | None:
    """The path of the first field named like a secret or holding a value shaped like one."""
    if isinstance(value, Mapping):
        for name, inner in value.items():
            here = f"{path}.{name}"
            if _SECRET_NAME.search(str(name)):
                return here
            found = _secret_in(inner, here)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, inner in enumerate(value):
            found = _secret_in(inner, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and contains_secret(value):
        return path
    return None


def recorded_event_problem(action: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """What is wrong with a record RecordAuditEvent was asked to write (an error message starting with
    the field), or None."""
    if action not in RECORDED_ACTIONS:
        return f"action: not an action recorded from another service (one of {', '.join(RECORDED_ACTIONS)})"
    for name, details in (("before", before), ("after", after)):
        found = _secret_in(details, name)
        if found:
            return f"{name}: {found} looks like a secret; the audit trail never holds one"
    size = len(json.dumps([dict(before), dict(after)], separators=(",", ":")))
    if size > MAX_DETAILS_BYTES:
        return f"after: before and after together are {size} bytes of JSON, at most {MAX_DETAILS_BYTES}"
    return None


def role_action(action: str) -> roles.Action:
    """The portal role action a signed-in user needs to have ``action`` recorded in its name."""
    return RECORDED_ACTIONS[action]

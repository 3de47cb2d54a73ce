"""The portal's routes, one blueprint per resource; pages live under /<env>/ (live or sandbox)."""

from __future__ import annotations

from portal.routes import (
    audit,
    deliveries,
    events,
    golive,
    insights,
    keys,
    ledger,
    me,
    notifications,
    overview,
    requests,
    session,
    static,
    users,
    webhooks,
)

BLUEPRINTS = (
    static.bp,
    session.bp,
    overview.bp,
    insights.bp,
    keys.bp,
    audit.bp,
    requests.bp,
    ledger.bp,
    golive.bp,
    webhooks.bp,
    events.bp,
    deliveries.bp,
    users.bp,
    notifications.bp,
    me.bp,
)

__all__ = ["BLUEPRINTS"]

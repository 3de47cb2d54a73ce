"""GET /<env>/: the account, today's search usage and the webhook delivery success rates."""

from __future__ import annotations

import asyncio
import datetime as dt

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal import charts
from portal.context import PortalRequest, auth, hooks
from portal.web import env_of, need, render
from svckit.protos import timestamp
from svckit.prototables import ACCOUNT_STATUS, HOOKS_ENVIRONMENT
from svckit.vocabulary import AccountStatus
from travel.auth.v1 import auth_pb2 as apb
from travel.webhooks.v1 import webhooks_pb2 as wpb

bp = Blueprint("portal_overview")


@bp.get("/<env:str>/")
async def overview(request: PortalRequest, env: str) -> HTTPResponse:
    env = env_of(request)
    viewer = need(request, "account.read")
    account_id = viewer.user.account_id
    now = dt.datetime.now(dt.UTC)
    # Three calls at once (authsvc twice, webhookd once: both windows in one pass).
    account, usage, stats = await asyncio.gather(
        auth(request).get_account(apb.GetAccountRequest(account_id=account_id)),
        auth(request).get_usage(apb.GetUsageRequest(account_id=account_id)),
        hooks(request).get_attempt_stats(
            wpb.GetAttemptStatsRequest(
                account_id=account_id,
                environment=HOOKS_ENVIRONMENT.pb(env),
                since=timestamp(now - dt.timedelta(days=30)),
                recent_since=timestamp(now - dt.timedelta(hours=24)),
            ),
        ),
    )
    day = (int(stats.recent_succeeded), int(stats.recent_attempts))
    month = (int(stats.succeeded), int(stats.attempts))
    u = usage.usage
    return render(
        request,
        "overview.html",
        account=account.account,
        usage_bar=charts.usage_bar(u.searches_used, u.daily_search_allowance),
        rates=charts.success_rates([("24 h", *day), ("30 d", *month)]),
        read_only=ACCOUNT_STATUS.get(account.account.status) == AccountStatus.READ_ONLY,
    )

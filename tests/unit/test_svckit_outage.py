"""The rules of an outage (svckit.outage, svckit.readiness, edge.exceptions, the stream's close codes):
what counts as an outage, what a partner is told, what readiness answers, and that an outage is logged
as counted lines, never one per request."""

from __future__ import annotations

import logging

import asyncpg
import grpc
import pytest
import sqlalchemy.exc
from prometheus_client import REGISTRY

from edge.blueprints.stream import CLOSE_INTERNAL, CLOSE_KEY_INVALID, recheck_close
from edge.exceptions import PEER_UNAVAILABLE, edge_error, outage_error
from svckit.clients.errors import ClientError, PeerUnavailable
from svckit.outage import INTERNAL_MESSAGE, SUMMARY, OutageLog, is_outage
from svckit.readiness import answer


def _wrapped(orig: BaseException, cls: type[sqlalchemy.exc.DBAPIError]) -> BaseException:
    return cls("SELECT 1", {}, orig)


@pytest.mark.parametrize(
    ("exc", "outage"),
    [
        (ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"), True),
        (TimeoutError(), True),
        (_wrapped(Exception("connection is closed"), sqlalchemy.exc.InterfaceError), True),
        (_wrapped(Exception("server closed the connection"), sqlalchemy.exc.OperationalError), True),
        (_wrapped(asyncpg.AdminShutdownError("terminating connection"), sqlalchemy.exc.DBAPIError), True),
        (sqlalchemy.exc.TimeoutError("QueuePool limit reached"), True),
        (asyncpg.CannotConnectNowError("the database system is starting up"), True),
        # A bug or a constraint is no outage: answered 500 / as the service decides, never 503.
        (_wrapped(Exception("duplicate key"), sqlalchemy.exc.IntegrityError), False),
        (_wrapped(Exception("syntax error"), sqlalchemy.exc.ProgrammingError), False),
        (KeyError("x"), False),
        (ValueError("bad"), False),
    ],
)
def test_what_is_an_outage(exc: BaseException, outage: bool) -> None:
    assert is_outage(exc) is outage


def test_an_outage_raised_while_handling_another_error_is_one() -> None:
    try:
        try:
            raise ConnectionResetError(104, "reset")
        except OSError:
            raise RuntimeError("while rolling back") from None
    except RuntimeError as exc:
        assert exc.__cause__ is None
        assert is_outage(exc)  # the context: what failed first


@pytest.mark.parametrize(
    ("error", "status", "etype", "message"),
    [
        (PeerUnavailable("service_unavailable", "unreachable"), 503, "service_unavailable", PEER_UNAVAILABLE),
        (
            ClientError("service_unavailable", "db down", code=grpc.StatusCode.UNAVAILABLE),
            503,
            "service_unavailable",
            PEER_UNAVAILABLE,
        ),
        # The reproduction: a peer's UNKNOWN carried "Unexpected <class 'sqlalchemy...'>: ... user ...".
        (
            ClientError("internal_error", "Unexpected <class 'sqlalchemy.exc.InterfaceError'>: user=svc"),
            500,
            "internal_error",
            INTERNAL_MESSAGE,
        ),
        (ClientError("not_found", "no endpoint we_1"), 404, "not_found", "no endpoint we_1"),
    ],
)
def test_what_a_partner_is_told_of_a_peers_error(
    error: ClientError, status: int, etype: str, message: str
) -> None:
    answered = edge_error(error)
    assert (answered.kind.http_status, answered.type, answered.message) == (status, etype, message)


def test_the_edges_own_database_down_is_503() -> None:
    refused = outage_error(ConnectionRefusedError(111, "Connect call failed"))
    assert refused is not None
    assert (refused.type, refused.message) == ("service_unavailable", PEER_UNAVAILABLE)
    assert outage_error(KeyError("a bug")) is None


@pytest.mark.parametrize(
    ("etype", "closing"),
    [
        ("invalid_api_key", (CLOSE_KEY_INVALID, "invalid_api_key: m")),
        ("environment_mismatch", (CLOSE_KEY_INVALID, "environment_mismatch: m")),
        ("ip_not_allowed", (CLOSE_KEY_INVALID, "ip_not_allowed: m")),
        ("service_unavailable", None),  # stays open, checked again on the watch's next SYNC
        ("internal_error", (CLOSE_INTERNAL, "internal_error: the key could not be checked; reconnect")),
    ],
)
def test_a_stream_closes_4001_only_for_its_key(etype: str, closing: tuple[int, str] | None) -> None:
    assert recheck_close(etype, "m") == closing


@pytest.mark.parametrize(
    ("results", "status", "failing"),
    [
        ({"database": "ok", "authsvc": "ok"}, 200, None),
        ({"database": "ConnectionRefusedError", "authsvc": "ok"}, 503, ["database"]),
        ({"webhookd": "UNAVAILABLE", "authsvc": "NOT_SERVING"}, 503, ["authsvc", "webhookd"]),
    ],
)
def test_readiness_answer(results: dict[str, str], status: int, failing: list[str] | None) -> None:
    got_status, body = answer(results)
    assert got_status == status and body.get("failing") == failing and body["checks"] == results


def test_an_outage_is_logged_counted(caplog: pytest.LogCaptureFixture) -> None:
    def failures() -> float:
        return (
            REGISTRY.get_sample_value(
                "dependency_failures_total", {"dependency": "database", "reason": "connection_refused"}
            )
            or 0.0
        )

    before = failures()
    now = [0.0]
    outages = OutageLog(logging.getLogger("test.outage"), interval=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.outage"):
        for i in range(100):  # a request every 0.1 s for 10 s, no running loop: the next one logs
            now[0] = i * 0.1
            outages.add("database", ConnectionRefusedError(111, "refused"))
        now[0] = 10.0
        outages.add("database", ConnectionRefusedError(111, "refused"))
    records = [r for r in caplog.records if r.getMessage() == SUMMARY]
    assert [r.__dict__["total"] for r in records] == [1, 100]
    assert failures() - before == 101  # the metric counts every one
    assert not [r for r in records if r.exc_info]
    assert records[-1].__dict__["error"] == "ConnectionRefusedError: [Errno 111] refused"

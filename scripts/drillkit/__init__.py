"""The drill (docs/operations.md "The drill"): a deployment of 2 authsvc, 2 webhookd, 2 edges (the second with
``--workers``) and a portal, on PostgreSQL and Redis, under steady partner and operator traffic, through
phases an operator chooses (``--phases``): each process killed with SIGKILL and restarted, the database
refusing connections, Redis stopped and started, a mixed-release roll of webhookd (the previous release
beside this one), and a slow webhook receiver while a webhookd dies.

Modules: ``options`` (flags), ``resources`` (the database, a Redis of its own, the previous release),
``stack`` (the processes), ``partner`` and ``operator`` (the traffic), ``watch`` (readiness), ``phases``,
``report``, ``__main__`` (the run). The entry point is ``scripts/drill.py``.
"""

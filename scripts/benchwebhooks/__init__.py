"""The pieces of scripts/bench_webhooks.py: its receivers (``receivers``), the worker under measure and one
run of it (``worker``), calibration (``calibration``), the service process (``service``), PostgreSQL
(``postgres``), the phases in their order (``phases``) and the tables (``report``)."""

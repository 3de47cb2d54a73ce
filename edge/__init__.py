"""The partner-facing HTTP and WebSocket gateway (Sanic): Host -> environment, key -> authsvc
(through a cache kept honest by WatchKeyChanges), idempotency, webhook management over webhookd,
/v1/stream, and product routes from a route table.

Importing the package loads nothing: the app is ``edge.app.create_app``, its configuration
``edge.config.EdgeConfig``, the route table ``edge.routetable.RouteTable``, the errors in
``edge.exceptions``.
"""

"""portal: the partner web portal (Sanic, server-rendered Jinja2, htmx). Talks to authsvc and webhookd
only over gRPC."""

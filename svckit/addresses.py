"""Where each process listens by default on one machine, named once: servers default their listen
flags to these and clients their peer flags, so a stack started with no flags finds itself."""

from __future__ import annotations

AUTHSVC = "127.0.0.1:50051"
WEBHOOKD = "127.0.0.1:50052"
EDGE_LIVE = "127.0.0.1:8080"
EDGE_SANDBOX = "127.0.0.1:8081"
PORTAL = "127.0.0.1:8090"

AUTHSVC_METRICS = "127.0.0.1:9101"
WEBHOOKD_METRICS = "127.0.0.1:9102"
EDGE_METRICS = "127.0.0.1:9103"
PORTAL_METRICS = "127.0.0.1:9104"

# The sandbox host partners' tools (svc) talk to by default.
SANDBOX_URL = f"http://{EDGE_SANDBOX}"
# The portal's public address, where alert e-mails link (webhookd --portal-url; the portal's --public-url).
PORTAL_URL = f"http://{PORTAL}"

"""The reference product service: a small hotels upstream behind the edge (docs/product-services.md).

``python -m examples.hotels serve`` listens over HTTPS with mutual TLS (its ``product:hotels``
certificate, the deployment's CA), accepts requests only from a peer whose certificate is the edge's,
reads the identity the edge forwards (``X-Account-Id``, ``X-Key-Id``, ``X-Environment``), books the
simulator's offers (a live mode A booking under a credit hold: ``bookings.with_credit``), deduplicates on
the partner's ``Idempotency-Key`` and tells the partner through
webhookd (``booking.confirmed``), with the client library only: it imports ``svckit`` and the generated
stubs, never a service package.
"""

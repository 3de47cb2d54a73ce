"""Webhook receivers a partner can start from (docs/webhooks.md "Receiver examples")."""

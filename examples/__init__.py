"""Runnable examples for product teams (docs/product-services.md); not part of the installed package."""

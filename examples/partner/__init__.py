"""The reference partner: a webhook receiver (and, to come, an API client) that passes every check of a
certification run, written from the public docs with the standard library alone (docs/sandbox.md "Go
live")."""

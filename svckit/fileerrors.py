"""What a process says when a file it was told to read (a key, a certificate, a password, its config) cannot
be read.

A file that exists but is not readable by the service's user is a deployment's ownership mistake (a secret
written under ``umask 077`` by root, mounted into a container that runs as uid 10001): the message says so and
names the uid, rather than suggesting the file be made anew."""

from __future__ import annotations

import os


def cannot_read(exc: OSError, path: str) -> str:
    """``exc`` (raised opening or reading ``path``) as words that name the file, never its content."""
    if isinstance(exc, PermissionError):
        return (
            f"cannot read {path}: permission denied (the service runs as uid {os.geteuid()}; "
            "make it readable by that user)"
        )
    return f"{exc.strerror or exc}: {path}"

#!/usr/bin/env python3
"""Generate the Python gRPC stubs of proto/ into ./travel (never edited by hand, not committed)."""

from __future__ import annotations

import pathlib
import shutil
import sys

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"
OUT = ROOT


def main() -> int:
    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    shutil.rmtree(OUT / "travel", ignore_errors=True)
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO}",
        f"-I{well_known}",
        f"--python_out={OUT}",
        f"--grpc_python_out={OUT}",
        f"--mypy_out={OUT}",
        f"--mypy_grpc_out={OUT}",
        *files,
    ]
    rc = protoc.main(args)
    if rc != 0:
        print("protoc failed", file=sys.stderr)
        return int(rc)
    for d in [OUT / "travel", *(p for p in (OUT / "travel").rglob("*") if p.is_dir())]:
        (d / "__init__.py").touch()
        (d / "py.typed").touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())

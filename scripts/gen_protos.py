#!/usr/bin/env python3
"""Generate the Python gRPC stubs of proto/ into ./travel (never edited by hand, not committed).

scripts/gen_protos.py [--out DIR]      DIR/travel instead (the client package's build stage)
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the gRPC stubs of proto/ as the package travel")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT, help="where travel/ goes (default: here)")
    out = parser.parse_args(argv).out.resolve()
    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    shutil.rmtree(out / "travel", ignore_errors=True)
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *files,
    ]
    rc = protoc.main(args)
    if rc != 0:
        print("protoc failed", file=sys.stderr)
        return int(rc)
    for d in [out / "travel", *(p for p in (out / "travel").rglob("*") if p.is_dir())]:
        (d / "__init__.py").touch()
        (d / "py.typed").touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())

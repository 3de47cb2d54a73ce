#!/usr/bin/env python3
"""The drill (docs/operations.md "The drill"): see ``scripts/drill.py --help``; the code is scripts/drillkit/.

.venv/bin/python scripts/drill.py [--phases release,kills,database,redis,slow] [--database URL]
    [--redis URL] [--base-port N] [--workers 2] [--lease-seconds 20] [--keep]
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from drillkit.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

from __future__ import annotations

import sys

from authsvc._server import main

sys.exit(main())

from __future__ import annotations

import sys

from webhookd._server import main

sys.exit(main())

"""``python -m audits``: the same as ``secagg-dp-audit``."""

from __future__ import annotations

import sys

from audits.cli import main

sys.exit(main())

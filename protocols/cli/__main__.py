"""``python -m protocols.cli`` runs the ``secagg-dp`` command line."""

import sys

from protocols.cli import main

sys.exit(main())

"""``python -m reconciler.cli``."""

import sys

from reconciler.cli.app import main

sys.exit(main())

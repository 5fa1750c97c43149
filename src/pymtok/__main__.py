"""``python -m pymtok``: the ``pymtok`` command."""

import sys

from .cli import main

sys.exit(main())

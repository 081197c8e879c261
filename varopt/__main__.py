"""``python -m varopt ...``: the command-line interface of :mod:`varopt.cli` (the same as the ``varopt`` script)."""
import sys

from .cli import main

sys.exit(main())

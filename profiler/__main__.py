"""``python -m profiler``: the command line (see ``profiler.cli``)."""

import sys

from profiler.cli import main

sys.exit(main())

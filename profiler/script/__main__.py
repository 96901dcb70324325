"""``python -m profiler.script SPEC.json``: the script process (``profiler.script.worker``)."""

import sys

from profiler.script.worker import main

sys.exit(main())

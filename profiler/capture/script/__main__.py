"""``python -m profiler.capture.script SPEC.json``: the script process (its ``worker`` module)."""

import sys

from profiler.capture.script.worker import main

sys.exit(main())

"""The toolkit's own source files and frame names, taken from the modules themselves.

The stack rules (``profiler.analysis.stacks``) recognise the toolkit's own frames by module and
qualified name; tests build stacks from these, so moving or renaming a module moves the tests'
frames with it instead of silently breaking classification.
"""

from __future__ import annotations

import inspect

from profiler.capture import schedule, worker
from profiler.capture.loop import Loop
from profiler.capture.phases import hooks, sampled
from profiler.capture.schedule import Windows
from profiler.capture.script import detect, driver
from profiler.capture.script import worker as script_worker

WORKER = worker.__file__
SCHEDULE = schedule.__file__
LOOP_FILE = inspect.getfile(Loop)
DRIVER_FILE = driver.__file__
SCRIPT_WORKER = script_worker.__file__
DETECT = detect.__file__
HOOKS_PHASE = hooks.__file__
SAMPLED_PHASE = sampled.__file__
SEGMENT = Windows.segment.__qualname__
WINDOW = Windows.window.__qualname__

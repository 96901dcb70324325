"""A job's workers agree on the figures that size their windows.

Place in the pipeline: the script schedule (``profiler.capture.script.schedule``) of each worker
of ``run --workers N`` asks ``Agreement.agree`` for its warm-up length and for the step time its
windows are planned at. The workers of a synchronous job step together, but each measures its
own step time: planned from their own figures, the windows of two workers came out a few steps
apart, and their framework windows shared no step (worker 0 captured steps 103-116, worker 1
117-133), so no step of the job had a straggler. Worker 0 (the chief) writes its figure to a
file of the run that every worker knows; the others wait for it and plan with the chief's.

The chief never waits. A worker whose chief has not written within ``WAIT_S`` (it crashed, or
its run ended) plans with its own figure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from profiler.model.atomic import atomic_write_text

#: How long a worker waits for the chief's figure (s).
WAIT_S = 60.0
#: How often it looks (s).
POLL_S = 0.005


class Agreement:
    """One worker's side of the agreement, over the file ``path``."""

    def __init__(self, path: Path, chief: bool, wait_s: float = WAIT_S) -> None:
        self.path = path
        self.chief = chief
        self.wait_s = wait_s

    def _read(self) -> dict[str, int]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def agree(self, key: str, value: int) -> int:
        """The chief's ``key``: written by the chief (``value``), read by the others (their
        own ``value`` when the chief has not written it in time)."""
        if self.chief:
            doc = self._read()
            doc[key] = int(value)
            atomic_write_text(self.path, json.dumps(doc))
            return int(value)
        end = time.monotonic() + self.wait_s
        while True:
            got = self._read().get(key)
            if isinstance(got, int):
                return got
            if time.monotonic() >= end:
                return int(value)
            time.sleep(POLL_S)

"""The timed phase: step markers only; the truth for wall time per step.

Nothing is installed. The runner records the loss on the evaluation set between segments of
this window (``records_metrics``); that time is a measured gap, outside every step.
"""

from __future__ import annotations

from profiler.capture.phases import Phase, PhaseContext
from profiler.model import OK, PhaseRecord, Window


class TimedPhase(Phase):
    name = "timed"
    records_metrics = True

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        return PhaseRecord(name=self.name, status=OK, window=window)

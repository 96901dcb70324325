"""The cyclic garbage collector's pauses, recorded for the whole of a script's run.

Place in the pipeline: inside the script process (``profiler.capture.script.worker``), installed
just before the script's first line and removed after its last, beside the memory sampler. A
``gc.callbacks`` callback reads the run's clock at each collection's start and stop and keeps
(start, stop, generation, objects freed) in four integer arrays: ~1-2 µs a collection here
(``overhead_ns``), against a collection's own tens of µs to seconds. At most ``MAX_PAUSES``
collections are kept (the run's totals count all of them; the record says from when pauses are
missing). Whatever thread triggers a collection, the process is paused: every pause is kept.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable
from typing import Any

from profiler.clock import now_ns
from profiler.model.gc import GcPauses

#: 32 bytes a collection: 3.2 MB at most.
MAX_PAUSES = 100_000


class GcRecorder:
    """Records every collection between ``start`` and ``stop``.

    Args:
        clock: the clock steps are timed with.
        limit: the most collections kept.
    """

    def __init__(self, clock: Callable[[], int] = now_ns, limit: int = MAX_PAUSES) -> None:
        self.clock = clock
        self.limit = limit
        self.start_ns = array("q")
        self.end_ns = array("q")
        self.generation = array("b")
        self.collected = array("q")
        #: [collections, their summed ns, the start of the first one not kept (0: none)].
        self._totals = [0, 0, 0]
        self.cost_ns: int | None = None
        self._callback = self._make_callback()

    def _make_callback(self) -> Callable[[str, dict[str, Any]], None]:
        # The hot path, a closure over locals (an attribute lookup costs here): a clock read
        # at the start; at the stop a clock read and four appends. The interpreter's own call
        # of a callback, twice with an info dict, is ~1.7 µs of the ~3 µs (``overhead_ns``).
        clock, limit, totals = self.clock, self.limit, self._totals
        add_start, add_end = self.start_ns.append, self.end_ns.append
        add_gen, add_freed = self.generation.append, self.collected.append
        began = [0]

        def callback(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                began[0] = clock()
                return
            t1 = clock()
            t0 = began[0]
            totals[0] += 1
            totals[1] += t1 - t0
            if totals[0] <= limit:
                add_start(t0)
                add_end(t1)
                add_gen(info["generation"])
                add_freed(info["collected"])
            elif not totals[2]:
                totals[2] = t0

        return callback

    @property
    def count(self) -> int:
        return self._totals[0]

    def start(self) -> None:
        self.cost_ns = overhead_ns()
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def record(self) -> GcPauses:
        return GcPauses(
            start_ns=tuple(self.start_ns),
            end_ns=tuple(self.end_ns),
            generation=tuple(self.generation),
            collected=tuple(self.collected),
            count=self._totals[0],
            total_ns=self._totals[1],
            complete_until_ns=self._totals[2] or None,
            cost_ns=self.cost_ns,
        )


def overhead_ns(calls: int = 300) -> int:
    """What recording one collection costs the process (ns, median of ``calls``): a young
    generation's ``gc.collect(0)`` with a recorder installed less one without (the
    interpreter's call of the callback twice, with its info dict, included)."""

    def median_collect() -> int:
        times = []
        for _ in range(calls):
            t = now_ns()
            gc.collect(0)
            times.append(now_ns() - t)
        times.sort()
        return times[len(times) // 2]

    bare = median_collect()
    rec = GcRecorder(limit=calls)
    gc.callbacks.append(rec._callback)
    try:
        recorded = median_collect()
    finally:
        gc.callbacks.remove(rec._callback)
    return max(recorded - bare, 0)

"""The one place that reads time.

Everything that timestamps a step, a phase or a gap takes a ``Clock`` argument (a callable
returning integer nanoseconds) whose default is ``now_ns``. Tests pass a ``FakeClock`` to drive
the real runner deterministically.

``time.perf_counter_ns`` is CLOCK_MONOTONIC on Linux: one time base for every process on the
machine, so a workload process's timestamps line up with the runner's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]

#: The real clock: integer nanoseconds, monotonic.
now_ns: Clock = time.perf_counter_ns


class FakeClock:
    """A deterministic clock for tests.

    Each call returns the current time, then advances it by ``tick_ns``. ``advance`` moves it
    by any amount, so a fake workload can "take" an exact duration per step.
    """

    def __init__(self, start_ns: int = 0, tick_ns: int = 0) -> None:
        self.t_ns = start_ns
        self.tick_ns = tick_ns

    def __call__(self) -> int:
        t = self.t_ns
        self.t_ns += self.tick_ns
        return t

    def advance(self, ns: int) -> None:
        if ns < 0:
            raise ValueError("a clock does not go backwards")
        self.t_ns += ns

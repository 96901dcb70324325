"""The cyclic garbage collector's pauses over a script's run, as the script process writes them.

Part of the trace model: a frozen record, written by ``profiler.capture.gc_pauses`` into the
script record's ``gc`` (``to_json``) and read back by ``profiler.analysis.gc``
(``GcPauses.from_json``). Times are integer nanoseconds of the run's clock. Imports nothing of
the project's but the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiler.model.trace import from_jsonable, to_jsonable


@dataclass(frozen=True, slots=True)
class GcPauses:
    """Every collection of the run (up to a bound), as columns, and totals of all of them.

    Attributes:
        start_ns, end_ns: each kept collection's start and stop (``gc.callbacks``).
        generation: the generation each collected (0, 1 or 2).
        collected: the objects each freed.
        count, total_ns: every collection of the run and their summed pause, kept or not.
        complete_until_ns: None when every collection is kept; else the start of the first one
            dropped (the buffer was full): pauses after it are not measured.
        cost_ns: what recording one collection costs the process (median, the callback's
            two calls), measured at the run's start.
    """

    start_ns: tuple[int, ...]
    end_ns: tuple[int, ...]
    generation: tuple[int, ...]
    collected: tuple[int, ...]
    count: int
    total_ns: int
    complete_until_ns: int | None = None
    cost_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(to_jsonable(self))

    @staticmethod
    def from_json(data: Any) -> GcPauses | None:
        if not isinstance(data, dict) or "start_ns" not in data:
            return None
        return from_jsonable(GcPauses, data)  # type: ignore[no-any-return]

"""Seed 004, cause isolation: the hand-written Adam drawing a fresh batch every epoch.

Variant of ``adam_handwritten`` (seed 004). The one difference: a new batch ``arr = randint(0,
n, 32)`` is drawn at the start of every epoch (``sw = 1``) instead of once every ``int(n / 32) -
1 = 129`` epochs (``seed_adam(..., fix="fresh_batch")``). Single-sample updates and the
epoch-keyed bias correction are kept. It isolates the stale batch: early on it barely matters,
but reusing 32 samples for 129 epochs sets the final floor (the loop has touched under 1% of the
data after 100 epochs). Not in the default suite; the efficiency process
(``profiler.capture.efficiency``) runs it.
"""

from __future__ import annotations

from profiler.workloads import adam_handwritten
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    return adam_handwritten.build(params, fix="fresh_batch")


WORKLOAD = WorkloadSpec(
    name="adam_freshbatch",
    title="hand-written Adam, a fresh batch every epoch (one cause of seed 004 removed)",
    doc=__doc__ or "",
    seed="004",
    framework="numpy",
    defaults=adam_handwritten.WORKLOAD.defaults,
    full_steps=adam_handwritten.WORKLOAD.full_steps,
    build=build,
    default_suite=False,
)

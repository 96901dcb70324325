"""Seed 004, cause isolation: the hand-written Adam with one mean-of-batch update per epoch.

Variant of ``adam_handwritten`` (seed 004). The one difference: each epoch makes one update
with the mean of the seed's ``grad`` over its 32-sample batch instead of 32 single-sample
updates (``seed_adam(..., fix="mean_batch")``). The stale batch (reused for 129 epochs), the
``w``-before-``b`` order and the bias correction's epoch counter are kept; with one update per
epoch that counter *is* the update count, so the bias correction is right here by construction.
It isolates per-sample versus mean-of-batch updates, a trade-off: many fewer samples to a given
loss with single-sample updates, fewer updates and a much lower floor with the mean. A step is
one epoch: one update on 32 samples. Not in the default suite; the efficiency process
(``profiler.capture.efficiency``) runs it.
"""

from __future__ import annotations

from profiler.workloads import adam_handwritten
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    return adam_handwritten.build(params, fix="mean_batch")


WORKLOAD = WorkloadSpec(
    name="adam_meanbatch",
    title="hand-written Adam, one mean-of-batch update per epoch (one cause removed)",
    doc=__doc__ or "",
    seed="004",
    framework="numpy",
    # One step is one 32-sample epoch: 5,000 steps are 160,000 samples, like adam_handwritten.
    defaults=adam_handwritten.WORKLOAD.defaults.with_(steps=5_000),
    full_steps=1_000,
    build=build,
    default_suite=False,
)

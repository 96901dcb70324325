"""Seed 004, cause isolation: the hand-written Adam with its bias correction keyed to updates.

Variant of ``adam_handwritten`` (seed 004). The one difference: the bias correction uses the
update count (``beta ** (32 t + i + 1)``) instead of the epoch counter (``beta ** (t + 1)``;
``seed_adam(..., fix="global_step")``). The stale batch and single-sample updates are kept. It
isolates the epoch-keyed bias correction, which divides ``m`` by ``1 - beta1 ** (t + 1)`` when
Adam's moments have averaged 32 times more gradients: the step is shrunk by ``sqrt(1 -
beta2^tc) / (1 - beta1^tc)`` over the same at the true count, ×0.53 after 4 epochs, ×0.23
after 31. Not in the default suite; the efficiency process (``profiler.capture.efficiency``) runs
it.
"""

from __future__ import annotations

from profiler.workloads import adam_handwritten
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    return adam_handwritten.build(params, fix="global_step")


WORKLOAD = WorkloadSpec(
    name="adam_globalstep",
    title="hand-written Adam, bias correction keyed to the update count (one cause removed)",
    doc=__doc__ or "",
    seed="004",
    framework="numpy",
    defaults=adam_handwritten.WORKLOAD.defaults,
    full_steps=adam_handwritten.WORKLOAD.full_steps,
    build=build,
    default_suite=False,
)

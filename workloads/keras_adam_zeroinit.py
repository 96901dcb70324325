"""Seed 004, cause isolation: the asker's Keras model started from zeros instead of glorot.

Variant of ``keras_adam`` (seed 004). The one difference: ``Dense(1,
kernel_initializer="zeros")``, so training starts from the hand-written loop's ``w = b = 0``
instead of a glorot-uniform draw of ``w`` (the bias starts at 0 in both). Everything else is
``fit``'s: shuffled mini-batches of 32 over all the data, Adam with the global step. It isolates
the initial state: the glorot draw of ``w`` moves Keras's starting loss up or down with the seed
(×0.65 to ×1.41 of the zero start on seeds 0–2 here), which is not a property of Adam or of
``fit``. Not in the default suite; the efficiency process (``profiler.capture.efficiency``) runs
it.
"""

from __future__ import annotations

from profiler.workloads import keras_adam
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    return keras_adam.build(params, kernel_initializer="zeros")


WORKLOAD = WorkloadSpec(
    name="keras_adam_zeroinit",
    title="Keras Dense(1) + Adam via fit, zero-initialised (one cause of seed 004 removed)",
    doc=__doc__ or "",
    seed="004",
    framework="keras",
    defaults=keras_adam.WORKLOAD.defaults,
    full_steps=keras_adam.WORKLOAD.full_steps,
    build=build,
    default_suite=False,
)

"""The case study's workloads: the generic loop contract (``profiler.capture.loop``), and the
data and loss the seed-000 loops share.

Place in the pipeline: each module of ``profiler.workloads`` defines ``WORKLOAD`` (a
``WorkloadSpec``) and a ``build(params)`` returning a ``Loop``; the workload process
(``profiler.capture.worker``) drives it. Heavy frameworks are imported inside ``build``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiler.capture.loop import (
    EAGER,
    FUNCTION,
    KERAS,
    NUMPY,
    TF1,
    TF2,
    Loop,
    LoopEnded,
    LoopInfo,
    Params,
    Registry,
    StepWrapper,
    WorkloadError,
    WorkloadSpec,
    load_ref,
    null_wrapper,
)

__all__ = [
    "EAGER",
    "FUNCTION",
    "KERAS",
    "NUMPY",
    "SEED000_B0",
    "SEED000_LR",
    "SEED000_W0",
    "TF1",
    "TF2",
    "Loop",
    "LoopEnded",
    "LoopInfo",
    "Params",
    "Registry",
    "StepWrapper",
    "WorkloadError",
    "WorkloadSpec",
    "load_ref",
    "null_wrapper",
    "seed000_data",
    "seed000_loss",
]

# --- seed 000 data and loss ------------------------------------------------------------------


def seed000_data(n: int) -> tuple[Any, Any]:
    """The seed's data: ``x = arange(100, step=0.1)`` (n = 1000), stretched over [0, 100).

    For n = 1000 this is exactly the seed's ``np.arange(100, step=0.1)``;
    ``y = x + 20 sin(x / 10) + 15``.
    """
    import numpy as np

    x = np.arange(n) * (100.0 / n)
    y = x + 20 * np.sin(x / 10) + 15
    return x, y


def seed000_loss(x: Any, y: Any) -> Callable[[dict[str, float]], float]:
    """The seed's quadratic loss ``sum((y - (W x + b))^2) / n`` in float64."""
    import numpy as np

    n = x.shape[0]

    def loss(p: dict[str, float]) -> float:
        return float(np.sum((y - (p["W"] * x + p["b"])) ** 2) / n)

    return loss


#: Learning rate and initial values of seed 000 (both implementations).
SEED000_LR = 1e-4
SEED000_W0 = 0.0
SEED000_B0 = 0.0

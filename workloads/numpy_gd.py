"""Seed 000, numpy side: full-batch gradient descent on linear regression, by hand.

The seed's second script, step for step: ``x = arange(100, step=0.1)``, ``y = x + 20 sin(x/10) +
15``, ``W = b = 0``, learning rate 1e-4, float64 arrays; each step computes both gradients with
``np.sum``, updates ``W`` and ``b`` with Python floats and recomputes the prediction and the loss,
as the seed does. It shows what a step costs when the arithmetic (4 array passes of n elements)
is nearly all there is: ~10 µs at n = 1000, against ~190 µs for the same step through a TF1
``session.run``.
"""

from __future__ import annotations

from profiler.model import WorkDecl
from profiler.workloads.base import (
    NUMPY,
    SEED000_B0,
    SEED000_LR,
    SEED000_W0,
    Loop,
    LoopInfo,
    Params,
    WorkloadSpec,
    seed000_data,
    seed000_loss,
)

#: Arithmetic per step, counted from the expressions: W gradient 4n (negate, subtract,
#: multiply, sum), b gradient 3n, prediction 2n, loss 3n.
FLOPS_PER_SAMPLE = 12
#: Array elements read + written per sample by those expressions, 8 bytes each.
BYTES_PER_SAMPLE = 25 * 8


def work(n: int) -> WorkDecl:
    return WorkDecl(
        samples_per_step=n,
        updates_per_step=1,
        steps_per_epoch=1,
        flops_per_step=FLOPS_PER_SAMPLE * n,
        bytes_per_step=BYTES_PER_SAMPLE * n,
    )


def build(params: Params) -> Loop:
    import numpy as np

    x_data_input, y_data_input = seed000_data(params.n)
    n_samples = x_data_input.shape[0]
    W = SEED000_W0
    b = SEED000_B0
    y_gd_approx = W * x_data_input + b
    loss = np.sum((y_data_input - y_gd_approx) ** 2) / n_samples
    GD_stepsize = SEED000_LR

    def step() -> None:
        # The seed's loop body, unchanged but for the closure.
        nonlocal W, b, y_gd_approx, loss
        loss_gradient_W = 2.0 / n_samples * np.sum(-x_data_input * (y_data_input - y_gd_approx))
        loss_gradient_b = 2.0 / n_samples * np.sum(-1 * (y_data_input - y_gd_approx))

        W = W - GD_stepsize * loss_gradient_W
        b = b - GD_stepsize * loss_gradient_b

        y_gd_approx = W * x_data_input + b
        loss = np.sum((y_data_input - y_gd_approx) ** 2) / x_data_input.shape[0]

    def current() -> dict[str, float]:
        return {"W": float(W), "b": float(b)}

    return Loop(
        step=step,
        work=work(params.n),
        params=current,
        eval_loss=seed000_loss(x_data_input, y_data_input),
        info=LoopInfo(kind=NUMPY),
    )


WORKLOAD = WorkloadSpec(
    name="numpy_gd",
    title="numpy gradient descent, the seed-000 loop",
    doc=__doc__ or "",
    seed="000",
    framework="numpy",
    defaults=Params(steps=20_000, n=1000),
    full_steps=100_000,
    build=build,
)

"""Seed 004, corrected: mini-batch Adam in numpy, the algorithm Keras's ``fit`` runs.

Variant of ``keras_adam`` (seed 004). The one difference: the implementation. The algorithm is
``fit``'s: every epoch a fresh permutation of all the data (``numpy.random.default_rng(seed)``),
cut into batches of 32 (a short last batch when 32 does not divide n, as Keras does; n = 4,160 =
130 · 32 has none); one update per batch with the mean of the batch's gradient; bias correction
with the global update count; Keras's Adam formula and epsilon. It runs in hand-written numpy
(the batch's gradient vectorised) instead of Keras, from the asker's ``w = b = 0`` rather than
Keras's glorot draw (a difference of initial state, not of the loop). Against
``adam_handwritten`` it is the asker's loop with the four fixes the accepted answer names. It
shows that the fixed hand-written loop does per update what Keras does, at a few µs a step
instead of Keras's ~700–900 µs.

``w`` and ``b`` stay Python floats and Adam's arithmetic stays scalar, as in the seed: on two
parameters a numpy array operation costs ~0.5 µs of dispatch for two flops, so "vectorising"
the optimizer would triple the step.

The update is Keras 3's Adam formula (``keras/src/optimizers/adam.py``): ``alpha = lr * sqrt(1 -
beta2^t) / (1 - beta1^t)``, ``p -= alpha * m / (sqrt(v) + epsilon)``, with Keras's default
``epsilon = 1e-7`` added to ``sqrt(v)`` without v's bias correction (Kingma & Ba's "epsilon
hat"). Written in the textbook form ``m_hat / (sqrt(v_hat) + eps)``, that is ``eps = epsilon /
sqrt(1 - beta2^t)``: ~32 times Keras's epsilon at the first update, tending to it as t grows.

A step is one mini-batch update (32 samples); an epoch is ceil(n / 32) = 130 steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from profiler.model import WorkDecl
from profiler.workloads.base import NUMPY, Loop, LoopInfo, Params, WorkloadSpec

BATCH_SIZE = 32
LR = 1e-3
BETA1 = 0.9
BETA2 = 0.999
#: Keras's default (``keras.optimizers.Adam(epsilon=1e-7)``; the seed's ``10e-8`` is the same
#: number), applied Keras's way.
EPSILON = 1e-7

#: Flops per sample of a batch, from the step's expressions: ``w * xb + b`` 2, ``yb - ...`` 1,
#: ``xb.dot(r)`` 2 (multiply, add), ``r.sum()`` 1.
FLOPS_PER_SAMPLE = 6
#: Flops per update outside the batch: per parameter the gradient's scale 2, m 3, v 4,
#: ``alpha`` 7 (two powers, two subtractions, sqrt, multiply, divide), the update 5.
FLOPS_PER_UPDATE = 2 * (2 + 3 + 4 + 7 + 5)
#: Array elements read + written per sample, 8 bytes each: the index slice (1), gathering
#: ``xb`` and ``yb`` (index, value, result: 3 each), ``w * xb`` (2), ``+ b`` (2), ``yb - ...``
#: (3), ``xb.dot(r)`` (2), ``r.sum()`` (1). Optimizer state is scalars: not counted.
BYTES_PER_SAMPLE = 17 * 8

#: ``(p, m, v, g, t) -> (p, m, v)`` for one parameter.
AdamUpdate = Callable[[float, float, float, float, int], "tuple[float, float, float]"]


def adam(
    lr: float = LR, beta1: float = BETA1, beta2: float = BETA2, epsilon: float = EPSILON
) -> AdamUpdate:
    """Keras 3's Adam update of one scalar parameter, ``t`` the 1-based update count."""

    def update(p: float, m: float, v: float, g: float, t: int) -> tuple[float, float, float]:
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * (g * g)
        alpha = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        p = p - alpha * m / (math.sqrt(v) + epsilon)
        return p, m, v

    return update


def work(n: int, batch_size: int = BATCH_SIZE) -> WorkDecl:
    return WorkDecl(
        samples_per_step=batch_size,
        updates_per_step=1,
        steps_per_epoch=-(-n // batch_size),
        flops_per_step=FLOPS_PER_SAMPLE * batch_size + FLOPS_PER_UPDATE,
        bytes_per_step=BYTES_PER_SAMPLE * batch_size,
    )


def build(params: Params) -> Loop:
    import numpy as np

    from profiler.workloads import seed004

    x, y = seed004.data(params.n, params.seed)
    n = x.shape[0]
    rng = np.random.default_rng(params.seed)
    update = adam()
    w = b = 0.0
    mw = vw = mb = vb = 0.0
    t = 0  # updates so far: the bias correction's counter
    perm = np.arange(0)
    pos = n  # next batch's start in perm; n: the first step begins an epoch
    idx = perm

    def step() -> None:
        nonlocal w, b, mw, vw, mb, vb, t, perm, pos, idx
        if pos >= n:  # a new epoch: a fresh shuffle of all the data
            perm = rng.permutation(n)
            pos = 0
        idx = perm[pos : pos + BATCH_SIZE]
        pos += BATCH_SIZE
        xb = x[idx]
        r = y[idx] - (w * xb + b)
        # Gradients of mean((y - w x - b)^2) over the batch (a short last batch divides by less).
        scale = -2.0 / len(idx)
        gw = scale * float(xb.dot(r))
        gb = scale * float(r.sum())
        t += 1
        w, mw, vw = update(w, mw, vw, gw, t)
        b, mb, vb = update(b, mb, vb, gb, t)

    def current() -> dict[str, float]:
        return {"w": w, "b": b}

    return Loop(
        step=step,
        work=work(n),
        params=current,
        eval_loss=seed004.eval_loss(x, y),
        info=LoopInfo(kind=NUMPY),
        probes={
            "batch_size": BATCH_SIZE,
            "optimizer_step": lambda: t,
            "batch_indices": lambda: idx,
        },
    )


WORKLOAD = WorkloadSpec(
    name="adam_minibatch",
    title="mini-batch Adam in numpy, the seed-004 loop corrected",
    doc=__doc__ or "",
    seed="004",
    framework="numpy",
    defaults=Params(steps=100_000, n=4160),
    # Keras's 100 epochs in the question, at 130 updates an epoch.
    full_steps=13_000,
    build=build,
)

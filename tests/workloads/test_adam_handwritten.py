"""adam_handwritten is the seed's Adam: the same batch draws, reuse and arithmetic, bit for bit."""

from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pytest

from profiler.workloads import adam_handwritten, get, seed004
from profiler.workloads.base import Params, WorkloadError

#: Tiny data: sw = int(128 / 32) - 1 = 3, so a batch is drawn every 3 epochs.
N = 128
EPOCHS = 40
SEED = 7


# --- the seed's code, copied; only the print is dropped and the draws and final w, b are
# --- returned so the test can compare them.
def grad(x, y, w, b, par):
    if par == "w":
        return -2 * x * (y - w * x - b)
    if par == "b":
        return -2 * (y - w * x - b)


def cost(x, y, w, b):
    return np.mean((y - w * x - b) ** 2)


def Adam(x, y, alpha, beta1=0.9, beta2=0.999, epsilon=10e-8, epochs=1000, batch_size=32):
    mw = 0
    vw = 0
    mb = 0
    vb = 0

    mmw = 0
    vvw = 0
    mmb = 0
    vvb = 0

    w = 0
    b = 0

    bestw = 0
    bestb = 0
    bestcost = cost(x, y, w, b)

    n = len(x)
    sw = int(n / batch_size) - 1
    draws = []

    for t in range(epochs):
        if t % sw == 0:
            arr = np.random.randint(0, n, batch_size)
            draws.append((t, arr.copy()))

        if t % 100 == 0:
            cost(x, y, w, b)

        if t % 15 == 0:  # noqa: SIM102 (the seed's nesting)
            if cost(x, y, w, b) < bestcost:
                bestw = w
                bestb = b
                bestcost = cost(x, y, w, b)

        for i in range(len(arr)):
            mw = beta1 * mw + (1 - beta1) * grad(x[arr[i]], y[arr[i]], w, b, "w")
            vw = beta2 * vw + (1 - beta2) * ((grad(x[arr[i]], y[arr[i]], w, b, "w")) ** 2)

            mmw = mw / (1 - beta1 ** (t + 1))
            vvw = vw / (1 - beta2 ** (t + 1))

            w = w - (alpha * mmw) / (math.sqrt(vvw) + epsilon)

            mb = beta1 * mb + (1 - beta1) * grad(x[arr[i]], y[arr[i]], w, b, "b")
            vb = beta2 * vb + (1 - beta2) * ((grad(x[arr[i]], y[arr[i]], w, b, "b")) ** 2)

            mmb = mb / (1 - beta1 ** (t + 1))
            vvb = vb / (1 - beta2 ** (t + 1))

            b = b - (alpha * mmb) / (math.sqrt(vvb) + epsilon)

    return (bestw, bestb, bestcost), draws, (w, b)


@pytest.fixture(scope="module")
def seed_run():
    x, y = seed004.data(N, SEED)
    np.random.seed(SEED)
    return Adam(x, y, 1e-3, epochs=EPOCHS)


@pytest.fixture(scope="module")
def workload_run():
    """The workload for EPOCHS epochs, one step at a time; the batch each epoch began with."""
    loop = get("adam_handwritten").build(Params(steps=1, n=N, seed=SEED))
    batch_of_epoch = []
    for _t in range(EPOCHS):
        loop.run(1, [], time.perf_counter_ns)  # the step that begins the epoch draws, if due
        batch_of_epoch.append(loop.probes["batch_indices"]().copy())
        loop.run(31, [], time.perf_counter_ns)
    return loop, batch_of_epoch


def test_draws_the_same_batches_at_the_same_epochs(seed_run, workload_run):
    _best, draws, _wb = seed_run
    _loop, batch_of_epoch = workload_run
    assert [t for t, _ in draws] == list(range(0, EPOCHS, 3))
    for t, arr in draws:
        # Drawn at epoch t, then reused unchanged for the next sw - 1 epochs.
        for reuse in range(t, min(t + 3, EPOCHS)):
            assert np.array_equal(batch_of_epoch[reuse], arr), (t, reuse)


def test_same_w_and_b_and_best_exactly(seed_run, workload_run):
    best, _draws, (w, b) = seed_run
    loop, _ = workload_run
    assert loop.params() == {"w": w, "b": b}
    state = inspect.getgeneratorlocals(loop.probes["generator"])
    assert (state["bestw"], state["bestb"], state["bestcost"]) == best


def test_bias_correction_counter_is_the_epoch_counter(workload_run):
    loop, _ = workload_run
    assert loop.steps_done == EPOCHS * 32
    # The seed's beta ** (t + 1): t + 1 is the epoch count, 32 times smaller than the updates.
    assert loop.probes["optimizer_step"]() == EPOCHS


def test_one_step_is_one_single_sample_update():
    loop = get("adam_handwritten").build(Params(steps=1, n=N, seed=SEED))
    assert loop.probes["optimizer_step"]() == 0 and loop.params() == {"w": 0.0, "b": 0.0}
    loop.run(1, [], time.perf_counter_ns)
    x, y = seed004.data(N, SEED)
    i = np.random.RandomState(SEED).randint(0, N, 32)[0]
    # The first update by hand: m = 0.1 g, v = 0.001 g^2, bias-corrected with t + 1 = 1.
    g = grad(x[i], y[i], 0, 0, "w")
    w = -(1e-3 * g) / (math.sqrt(g * g) + 10e-8)
    assert loop.params()["w"] == pytest.approx(w, rel=1e-12)
    assert loop.probes["optimizer_step"]() == 1


def test_rejects_data_too_small_for_the_seeds_batch_period():
    with pytest.raises(WorkloadError, match="n >= 64"):
        get("adam_handwritten").build(Params(steps=1, n=63))


def test_work_declared_per_single_sample_update():
    work = adam_handwritten.work(seed004.N)
    assert (work.samples_per_step, work.updates_per_step, work.steps_per_epoch) == (1, 1, 32)
    assert work.flops_per_step > adam_handwritten.FLOPS_PER_UPDATE  # cost evaluations included

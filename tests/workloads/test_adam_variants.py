"""Seed 004's cause-isolation variants: each is the seed's loop (or Keras's) minus one quirk."""

from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pytest

from profiler import workloads
from profiler.workloads import adam_handwritten, get, seed004
from profiler.workloads.base import Params

SEED = 5
VARIANTS = {
    "adam_freshbatch": "adam_handwritten",
    "adam_globalstep": "adam_handwritten",
    "adam_meanbatch": "adam_handwritten",
    "keras_adam_zeroinit": "keras_adam",
}


def run(name: str, steps: int, n: int = 4160, seed: int = SEED):  # type: ignore[no-untyped-def]
    loop = get(name).build(Params(steps=1, n=n, seed=seed))
    loop.run(steps, [], time.perf_counter_ns)
    return loop


def draws(n: int, seed: int, count: int) -> list[np.ndarray]:
    """The seed's batch draws, in order: ``np.random.seed(seed); randint(0, n, 32)`` each."""
    rs = np.random.RandomState(seed)
    return [rs.randint(0, n, 32) for _ in range(count)]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_registered_outside_the_default_suite_with_one_difference(name):
    spec = get(name)
    assert name in workloads.names() and name not in workloads.default_suite()
    assert not spec.default_suite and spec.seed == "004"
    assert spec.doc.startswith("Seed 004")
    assert f"Variant of ``{VARIANTS[name]}``" in spec.doc
    assert spec.doc.count("The one difference") == 1


def test_seed_loop_rejects_an_unknown_fix():
    with pytest.raises(workloads.WorkloadError, match="unknown fix"):
        adam_handwritten.build(Params(steps=1, n=64), fix="everything")


def test_fresh_batch_draws_a_new_batch_every_epoch_and_nothing_else_changes():
    loop = get("adam_freshbatch").build(Params(steps=1, n=4160, seed=SEED))
    seen = []
    for _ in range(4):
        loop.run(32, [], time.perf_counter_ns)
        seen.append(loop.probes["batch_indices"]().copy())
    # The seed's own draws, one per epoch instead of one per 129 epochs.
    for got, want in zip(seen, draws(4160, SEED, 4), strict=True):
        assert np.array_equal(got, want)
    # At n = 64 the seed itself draws every epoch (sw = 1): the variant is the seed, bit for bit.
    a, b = run("adam_freshbatch", 640, n=64), run("adam_handwritten", 640, n=64)
    assert a.params() == b.params()


def test_global_step_keys_the_bias_correction_to_updates():
    loop = get("adam_globalstep").build(Params(steps=1, n=4160, seed=SEED))
    seed = get("adam_handwritten").build(Params(steps=1, n=4160, seed=SEED))
    for k in (1, 2, 33):
        loop.run(k - loop.steps_done, [], time.perf_counter_ns)
        seed.run(k - seed.steps_done, [], time.perf_counter_ns)
        assert loop.probes["optimizer_step"]() == k
        assert seed.probes["optimizer_step"]() == 1 + (k - 1) // 32
        if k == 1:  # the first update's counter is 1 in both: the same step
            assert loop.params() == seed.params()
        else:
            assert loop.params() != seed.params()
    # The same batch draws as the seed: only the counter differs.
    assert np.array_equal(loop.probes["batch_indices"](), seed.probes["batch_indices"]())


def test_mean_batch_makes_one_update_per_epoch_on_the_batch_mean():
    x, y = seed004.data(4160, SEED)
    loop = run("adam_meanbatch", 1)
    arr = draws(4160, SEED, 1)[0]
    assert np.array_equal(loop.probes["batch_indices"](), arr)
    assert loop.probes["optimizer_step"]() == 1
    # First update from w = b = 0: m_hat = g, v_hat = g^2, so each step is ~alpha * sign(g);
    # b's gradient is taken at the new w, as in the seed's loop.
    a, eps = adam_handwritten.ALPHA, adam_handwritten.EPSILON
    gw = float(np.mean(adam_handwritten.grad(x[arr], y[arr], 0.0, 0.0, "w")))
    w = -(a * gw) / (math.sqrt(gw * gw) + eps)
    gb = float(np.mean(adam_handwritten.grad(x[arr], y[arr], w, 0.0, "b")))
    b = -(a * gb) / (math.sqrt(gb * gb) + eps)
    assert loop.params()["w"] == pytest.approx(w, rel=1e-12)
    assert loop.params()["b"] == pytest.approx(b, rel=1e-12)
    work = loop.work
    assert (work.samples_per_step, work.updates_per_step, work.steps_per_epoch) == (32, 1, 1)
    # The stale batch is kept: the same array for 129 epochs, then a new draw.
    first = loop.probes["batch_indices"]()
    loop.run(128, [], time.perf_counter_ns)
    assert loop.probes["batch_indices"]() is first
    loop.run(1, [], time.perf_counter_ns)
    assert np.array_equal(loop.probes["batch_indices"](), draws(4160, SEED, 2)[1])
    assert loop.probes["optimizer_step"]() == 130


def test_the_default_loop_reads_the_counter_it_used():
    loop = run("adam_handwritten", 0)
    assert loop.probes["optimizer_step"]() == 0
    state = inspect.getgeneratorlocals(loop.probes["generator"])
    assert "tc" not in state  # not started: no counter yet
    loop.run(65, [], time.perf_counter_ns)
    assert loop.probes["optimizer_step"]() == 3  # the third epoch's first update


@pytest.mark.tf
def test_keras_zero_init_starts_where_the_handwritten_loop_does():
    zero = get("keras_adam_zeroinit").build(Params(steps=1, n=4160, seed=SEED))
    glorot = get("keras_adam").build(Params(steps=1, n=4160, seed=SEED))
    hand = get("adam_handwritten").build(Params(steps=1, n=4160, seed=SEED))
    assert zero.params() == {"w": 0.0, "b": 0.0}
    assert zero.loss() == hand.loss()
    assert glorot.params()["w"] != 0.0 and glorot.params()["b"] == 0.0
    assert (zero.probes["initializer"], glorot.probes["initializer"]) == ("zeros", "glorot_uniform")
    zero.run(1, [], time.perf_counter_ns)  # one epoch of fit
    assert zero.probes["optimizer_step"]() == 130 and zero.loss() < hand.loss()

"""Seed 000: numpy_gd and tf1_gd are the same regression and reach the same parameters."""

from __future__ import annotations

import time

import pytest

from profiler.workloads import get
from profiler.workloads.base import Params


@pytest.fixture(scope="module")
def after_2000():
    out = {}
    for name in ("numpy_gd", "tf1_gd"):
        loop = get(name).build(Params(steps=2000, n=1000))
        start = loop.loss()
        losses = []
        for _ in range(4):
            loop.run(500, [], time.perf_counter_ns)
            losses.append(loop.loss())
        out[name] = (start, losses, loop.params(), loop)
    return out


@pytest.mark.tf
def test_same_w_and_b_after_2000_steps(after_2000):
    np_params = after_2000["numpy_gd"][2]
    tf_params = after_2000["tf1_gd"][2]
    assert tf_params["W"] == pytest.approx(np_params["W"], rel=1e-3)
    assert tf_params["b"] == pytest.approx(np_params["b"], rel=1e-3)


@pytest.mark.tf
def test_losses_fall(after_2000):
    for name, (start, losses, _p, _l) in after_2000.items():
        assert start > losses[0] > losses[1] > losses[2] > losses[3], name


def test_seed_data_is_the_seeds_arange():
    import numpy as np

    from profiler.workloads.base import seed000_data

    x, y = seed000_data(1000)
    assert np.array_equal(x, np.arange(100, step=0.1))
    assert np.array_equal(y, x + 20 * np.sin(x / 10) + 15)


@pytest.mark.tf
def test_tf1_gd_feeds_float64_and_fetches_train_and_loss(after_2000):
    loop = after_2000["tf1_gd"][3]
    graph = loop.info.graph
    placeholders = [op for op in graph.get_operations() if op.type == "Placeholder"]
    assert sorted(op.name for op in placeholders) == ["tf_x_data", "tf_y_data"]
    assert all(op.outputs[0].dtype.name == "float32" for op in placeholders)
    assert loop.info.fetches == 2 and loop.info.feeds == 2


def test_declared_flops_scale_with_n():
    from profiler.workloads import numpy_gd, tf1_gd

    assert numpy_gd.work(2000).flops_per_step == 2 * numpy_gd.work(1000).flops_per_step
    assert tf1_gd.work(1000, k=10).flops_per_step == 10 * tf1_gd.work(1000).flops_per_step

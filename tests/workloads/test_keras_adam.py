"""keras_adam: fit runs whole epochs, one mark per batch, wrapped batches when asked."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator

import pytest

from profiler.workloads import get, keras_adam
from profiler.workloads.base import Params

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def loop():
    return get("keras_adam").build(Params(steps=1, n=4160, seed=0))


def test_run_covers_whole_epochs_with_one_mark_per_batch(loop):
    assert loop.work.steps_per_epoch == 130
    first = loop.steps_done
    it0 = loop.probes["optimizer_step"]()
    marks = [time.perf_counter_ns()]
    loop.run(5, marks, time.perf_counter_ns)
    # Asked for 5 steps, ran the epoch they begin: 130 batches, each one Adam update.
    assert len(marks) == 1 + 130
    assert all(a < b for a, b in itertools.pairwise(marks))
    assert loop.steps_done == first + 130
    assert loop.probes["optimizer_step"]() == it0 + 130
    marks = [time.perf_counter_ns()]
    loop.run(131, marks, time.perf_counter_ns)
    assert len(marks) == 1 + 260 and loop.steps_done == first + 390


def test_wrap_is_entered_per_batch_with_the_global_step(loop):
    events: list[tuple[str, int]] = []

    @contextlib.contextmanager
    def wrap(step: int) -> Iterator[None]:
        events.append(("enter", step))
        yield
        events.append(("exit", step))

    first = loop.steps_done
    marks: list[int] = []
    loop.run(1, marks, time.perf_counter_ns, wrap)
    assert len(marks) == 130
    want = [(kind, first + i) for i in range(130) for kind in ("enter", "exit")]
    assert events == want


def test_loss_falls_from_the_initial_weights():
    loop = get("keras_adam").build(Params(steps=1, n=4160, seed=1))
    start = loop.loss()
    loop.run(130, [], time.perf_counter_ns)
    assert loop.loss() < start


def test_callback_cost_is_measured_and_small(loop):
    cost = keras_adam.measure_callback_cost(loop, n=2000, repeats=3)
    assert loop.probes["callback_cost_ns"] == cost
    # Two extra Python calls and an append: well under a per-batch step of ~700 µs.
    assert 0 <= cost < 20_000

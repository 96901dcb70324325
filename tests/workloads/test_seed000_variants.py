"""Seed 000 variants: each one's single difference is real, and each trains like ``tf1_gd``."""

from __future__ import annotations

import time
from typing import Any

import pytest

from profiler.workloads import get
from profiler.workloads.base import Loop, Params

pytestmark = pytest.mark.tf

#: Training steps the trajectories are compared after (small: the tests stay fast).
STEPS = 500
VARIANTS = (
    "tf1_gd_f32feed",
    "tf1_gd_nofeed",
    "tf1_gd_trainonly",
    "tf1_gd_whileloop",
    "tf2_eager_gd",
    "tf2_function_step",
    "tf2_function_loop",
)


def build(name: str, k: int = 100) -> Loop:
    return get(name).build(Params(steps=10, n=1000, k=k))


def train(loop: Loop, steps: int) -> dict[str, float]:
    """Run ``steps`` training steps (``steps / k`` timed units) and return the parameters."""
    k = loop.work.units_per_step
    assert steps % k == 0
    loop.run(steps // k, [], time.perf_counter_ns)
    return loop.params()


class RunSpy:
    """Records ``(fetches, feed_dict)`` of every ``session.run`` the loop's step makes."""

    def __init__(self, loop: Loop, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[Any, Any]] = []
        sess = loop.info.session
        real = sess.run

        def run(fetches: Any, feed_dict: Any = None, **kwargs: Any) -> Any:
            self.calls.append((fetches, feed_dict))
            return real(fetches, feed_dict=feed_dict, **kwargs)

        # The steps call sess.run on the instance, so an instance attribute intercepts them.
        monkeypatch.setattr(sess, "run", run, raising=False)


@pytest.fixture(scope="module")
def reference() -> dict[int, dict[str, float]]:
    """tf1_gd's parameters after 7 and after STEPS training steps."""
    loop = build("tf1_gd")
    out = {7: train(loop, 7)}
    out[STEPS] = train(loop, STEPS - 7)
    loop.close()
    return out


@pytest.mark.parametrize("name", VARIANTS)
def test_reaches_tf1_gd_parameters(name: str, reference: dict[int, dict[str, float]]) -> None:
    loop = build(name)
    start = loop.loss()
    got = train(loop, STEPS)
    want = reference[STEPS]
    assert got["W"] == pytest.approx(want["W"], rel=1e-3)
    assert got["b"] == pytest.approx(want["b"], rel=1e-3)
    assert loop.loss() < start / 10
    loop.close()


def test_tf1_gd_baseline_feeds_float64_and_fetches_two(monkeypatch: pytest.MonkeyPatch) -> None:
    # The contrast the variants below differ from.
    loop = build("tf1_gd")
    spy = RunSpy(loop, monkeypatch)
    loop.run(2, [], time.perf_counter_ns)
    fetches, feed = spy.calls[-1]
    assert len(spy.calls) == 2 and len(fetches) == 2
    assert [v.dtype.name for v in feed.values()] == ["float64", "float64"]


def test_f32feed_feeds_float32_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = build("tf1_gd_f32feed")
    spy = RunSpy(loop, monkeypatch)
    loop.run(2, [], time.perf_counter_ns)
    fetches, feed = spy.calls[-1]
    assert len(fetches) == 2
    assert [v.dtype.name for v in feed.values()] == ["float32", "float32"]
    # Cast once at build: the same array objects every step.
    assert [id(v) for v in spy.calls[0][1].values()] == [id(v) for v in feed.values()]


def test_nofeed_has_no_placeholder_and_feeds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = build("tf1_gd_nofeed")
    ops = loop.info.graph.get_operations()
    assert not [op for op in ops if op.type == "Placeholder"]
    assert {op.name for op in ops if op.type == "Const"} >= {"tf_x_data", "tf_y_data"}
    spy = RunSpy(loop, monkeypatch)
    loop.run(2, [], time.perf_counter_ns)
    fetches, feed = spy.calls[-1]
    assert feed is None and len(fetches) == 2


def test_trainonly_fetches_only_the_train_op(monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    loop = build("tf1_gd_trainonly")
    spy = RunSpy(loop, monkeypatch)
    loop.run(2, [], time.perf_counter_ns)
    fetches, feed = spy.calls[-1]
    assert isinstance(fetches, tf.Operation) and fetches.type == "NoOp"
    assert [v.dtype.name for v in feed.values()] == ["float64", "float64"]
    assert loop.info.fetches == 1


def test_whileloop_runs_k_steps_per_session_run(
    monkeypatch: pytest.MonkeyPatch, reference: dict[int, dict[str, float]]
) -> None:
    loop = build("tf1_gd_whileloop", k=7)
    assert loop.work.units_per_step == 7 and loop.work.updates_per_step == 7
    spy = RunSpy(loop, monkeypatch)
    loop.run(1, [], time.perf_counter_ns)
    assert len(spy.calls) == 1
    _fetches, feed = spy.calls[0]
    assert [v.dtype.name for v in feed.values()] == ["float64", "float64"]
    # One call did 7 training steps: tf1_gd's parameters after 7 steps, not after 1.
    assert loop.params()["W"] == pytest.approx(reference[7]["W"], rel=1e-6)
    assert loop.params()["b"] == pytest.approx(reference[7]["b"], rel=1e-6)


def test_function_loop_runs_k_steps_per_call(reference: dict[int, dict[str, float]]) -> None:
    loop = build("tf2_function_loop", k=7)
    assert loop.work.units_per_step == 7
    loop.run(1, [], time.perf_counter_ns)
    assert loop.params()["W"] == pytest.approx(reference[7]["W"], rel=1e-6)
    loop.run(3, [], time.perf_counter_ns)
    # One trace: the loop is a graph while loop, not retraced per call.
    assert loop.info.function.experimental_get_tracing_count() == 1


def test_function_step_traces_once_and_runs_one_step_per_call(
    reference: dict[int, dict[str, float]],
) -> None:
    loop = build("tf2_function_step")
    assert loop.work.units_per_step == 1
    loop.run(7, [], time.perf_counter_ns)
    assert loop.params()["W"] == pytest.approx(reference[7]["W"], rel=1e-6)
    assert loop.info.function.experimental_get_tracing_count() == 1


def test_eager_step_is_not_a_function() -> None:
    import tensorflow as tf

    loop = build("tf2_eager_gd")
    assert loop.info.mode == "eager"
    assert tf.executing_eagerly()
    # A plain bound method: every op runs eagerly, nothing is traced.
    assert not hasattr(loop.step, "experimental_get_tracing_count")

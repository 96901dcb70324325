"""The markers API (profiler.step, profiler.metric): idle, active, and in a small numpy script."""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

import profiler
from profiler import markers
from profiler.capture.script.driver import METRIC_POINTS, StepDriver
from profiler.clock import FakeClock
from tests.conftest import REPO, python_env


def free_driver(clock=None) -> StepDriver:  # type: ignore[no-untyped-def]
    d = StepDriver(clock or FakeClock(tick_ns=10))
    d.started = True
    d._arm(None)  # free-running: boundaries counted, nothing handed off
    return d


@pytest.fixture()
def active():  # type: ignore[no-untyped-def]
    d = free_driver()
    markers.activate(d)
    yield d
    markers.deactivate()


def test_idle_markers_do_nothing() -> None:
    assert not markers.profiling()
    s = profiler.step(samples=32, updates=1)
    assert s is profiler.step() is markers._IDLE
    with profiler.step(), profiler.step(samples=2):
        pass
    assert profiler.metric(loss=1.0) is None
    # Exceptions pass through the idle marker untouched.
    with pytest.raises(KeyError), profiler.step():
        raise KeyError("x")


def test_importing_profiler_imports_nothing_heavy() -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, profiler; print(sorted(m for m in ('numpy', "
            "'tensorflow', 'jsonschema', 'profiler.script.driver') if m in sys.modules))",
        ],
        cwd=REPO,
        env=python_env(),
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "[]"


def _median_cost(body, n: int = 100_000, repeats: int = 7) -> float:  # type: ignore[no-untyped-def]
    costs = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        body(n)
        costs.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(costs)


def test_idle_step_is_cheaper_than_a_class_based_context_manager() -> None:
    # Markers must be nearly free: a class-based `with` costs ~270 ns; the idle step
    # returns a shared object instead of building one.
    class Step:
        def __init__(self, samples: int = 1, updates: int = 1) -> None:
            self.samples, self.updates = samples, updates

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            return None

    step = profiler.step

    def idle(n: int) -> None:
        for _ in range(n):
            with step(samples=32, updates=1):
                pass

    def classic(n: int) -> None:
        for _ in range(n):
            with Step(samples=32, updates=1):
                pass

    assert _median_cost(idle) < _median_cost(classic)


def test_active_steps_end_at_each_block_and_count_work(active: StepDriver) -> None:
    for i in range(3):
        # The inner step is nested: part of the outer one.
        with profiler.step(samples=10 + i, updates=2), profiler.step(samples=999):
            pass
    assert active.done == 3
    assert active.detectors["markers"].steps == 3
    assert (active.facts.samples, active.facts.updates) == (33, 6)
    assert active.facts.marked_work
    # From the first marked step on, detected framework calls are never steps of their own.
    assert active.block == 1


def test_a_step_that_raises_still_ends(active: StepDriver) -> None:
    with pytest.raises(ZeroDivisionError), profiler.step():
        1 / 0  # noqa: B018
    assert active.done == 1 and active.block == 1


def test_metric_points_follow_the_steps_and_stay_bounded(active: StepDriver) -> None:
    profiler.metric(loss=2.0)
    with profiler.step():
        pass
    profiler.metric(loss=1.5, accuracy=0.5)
    points = active.metric_points()
    assert [(p.step, p.name, p.value) for p in points] == [
        (-1, "loss", 2.0),
        (0, "accuracy", 0.5),
        (0, "loss", 1.5),
    ]
    assert all(p.cost_ns >= 0 for p in points)
    for _ in range(10 * METRIC_POINTS):
        with profiler.step():
            pass
        profiler.metric(loss=1.0)
    kept = [p.step for p in active.metric_points() if p.name == "loss"]
    assert METRIC_POINTS <= len(kept) < 2 * METRIC_POINTS
    gaps = {b - a for a, b in itertools.pairwise(kept[2:])}
    assert len(gaps) == 1  # evenly spread after thinning


@pytest.mark.slow
def test_markers_drive_steps_and_counters_in_a_numpy_script(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "profiler", "run", "--out", "runs"),
            *("--phases", "timed,sampled", "--max-steps", "2000"),
            str(REPO / "tests" / "data" / "markers_numpy.py"),
        ],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (summary,) = (tmp_path / "runs").glob("2*/summary.json")
    (w,) = json.loads(summary.read_text())["workloads"]
    s = w["script"]
    assert (s["steps"], s["detection"]["source"], s["detection"]["framework"]) == (
        2000,
        "markers",
        "numpy",
    )
    assert (w["work"]["samples_per_step"], w["work"]["updates_per_step"]) == (64, 1)
    loss = w["loss"]
    steps = [p["step"] for p in loss["trajectory"]]
    # metric() after every 100th step: points after steps 1, 101, ... (counted from 1).
    assert steps[:3] == [1, 101, 201] and len(steps) == 20
    assert loss["final"] < loss["initial"]
    assert w["step_time"]["median_us"] > 0
    assert s["detection"]["cost_ns"] < w["step_time"]["median_us"] * 1e3

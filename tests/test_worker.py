"""The workload process's schedule, driven deterministically by a fake clock."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from profiler.capture.phases import Budget, Phase, PhaseContext, PhaseUnavailable
from profiler.capture.phases.timed import TimedPhase
from profiler.capture.schedule import marker_cost_ns
from profiler.capture.worker import run_workload
from profiler.model import PhaseRecord, Window
from profiler.workloads.base import Params
from tests import fake_workloads as fw


@pytest.fixture()
def clock():
    fw.CLOCK.t_ns = 1_000_000
    fw.CLOCK.tick_ns = 0
    return fw.CLOCK


def _run(tmp_path: Path, clock, phases, steps=100, warmup=10, points=4):
    written = []
    events = []
    trace = run_workload(
        fw.FAKE,
        Params(steps=steps, n=8),
        phases,
        workload_dir=tmp_path,
        tensorboard_dir=tmp_path,
        clock=clock,
        progress=events.append,
        write=written.append,
        warmup_steps=warmup,
        metric_points=points,
    )
    return trace, written, events


def test_fake_clock_gives_exact_back_to_back_steps(tmp_path, clock):
    trace, written, events = _run(tmp_path, clock, [TimedPhase(Budget(1, 1, 10**6))])
    assert trace.warmup.durations_ns() == tuple(fw.STEP_NS + i for i in range(10))
    timed = trace.phase("timed")
    assert timed.status == "ok"
    w = timed.window
    # 100 steps in 4 segments of 25; step i takes STEP_NS + i, continuing after warm-up.
    assert [s.n_steps for s in w.segments] == [25, 25, 25, 25]
    assert w.durations_ns() == tuple(fw.STEP_NS + i for i in range(10, 110))
    for seg in w.segments:
        b = seg.boundaries_ns
        assert all(b[i + 1] - b[i] == fw.STEP_NS + seg.first_step + i for i in range(25))
    # Nothing is lost: the fake clock does not move while the loss is recorded.
    assert [g.dur_ns for g in w.gaps] == [0, 0, 0]
    assert [s.first_step for s in w.segments] == [10, 35, 60, 85]
    last = list(w.steps(trace.work))[-1]
    assert (last.index, last.samples, last.updates, last.epoch) == (109, 110 * 8, 110, 109 // 4)
    assert trace.build_ns == 0
    assert trace.marker_cost_ns == 0


def test_loss_is_recorded_before_the_first_step_and_after_each_segment(tmp_path, clock):
    trace, _, _ = _run(tmp_path, clock, [TimedPhase(Budget(1, 1, 10**6))])
    steps = [m.step for m in trace.metrics]
    # Initial loss (step -1), end of warm-up is not a metric point, then after each segment.
    assert steps == [-1, 34, 59, 84, 109]
    assert trace.metrics[0].value == 1.0
    assert trace.metrics[1].value == pytest.approx(0.25**35)
    assert trace.final == {"w": pytest.approx(0.5**110)}


def test_progress_and_partial_writes_happen_per_phase(tmp_path, clock):
    trace, written, events = _run(tmp_path, clock, [TimedPhase(Budget(1, 1, 10**6))])
    assert [w.status for w in written] == ["partial", "partial"]
    assert written[-1].phases[0].name == "timed"
    assert trace.status == "ok"
    timed_events = [e for e in events if e["phase"] == "timed"]
    assert [e["done"] for e in timed_events] == [25, 50, 75, 100]
    assert all(e["total"] == 100 for e in timed_events)


class _Skips(Phase):
    name = "sampled"

    def applies_to(self, spec):
        return "not for this workload"

    def remove(self, ctx, window):  # pragma: no cover - never installed
        raise AssertionError


class _Unavailable(Phase):
    name = "lines"

    def install(self, ctx):
        raise PhaseUnavailable("line_profiler is not installed; pip install line_profiler")

    def remove(self, ctx, window):  # pragma: no cover
        raise AssertionError


class _Breaks(Phase):
    name = "framework"
    aborted = False

    def remove(self, ctx, window):
        raise RuntimeError("collector exploded")

    def abort(self, ctx):
        _Breaks.aborted = True


class _Wraps(Phase):
    name = "hooks"
    seen: ClassVar[list[int]] = []

    def step_wrapper(self, ctx: PhaseContext):
        import contextlib

        def wrap(i):
            self.seen.append(i)
            return contextlib.nullcontext()

        return wrap

    def remove(self, ctx, window: Window) -> PhaseRecord:
        return PhaseRecord(self.name, "ok", window=window, data={"n": window.n_steps})


def test_a_phase_that_skips_is_unavailable_or_breaks_does_not_stop_the_others(tmp_path, clock):
    phases = [
        TimedPhase(Budget(1, 1, 10**6)),
        _Skips(Budget(1, 5, 5)),
        _Unavailable(Budget(1, 5, 5)),
        _Breaks(Budget(1, 5, 5, rewarm=0)),
        _Wraps(Budget(1, 7, 7, rewarm=3)),
    ]
    trace, _, _ = _run(tmp_path, clock, phases, steps=20)
    status = {p.name: (p.status, p.reason) for p in trace.phases}
    assert status["sampled"] == ("skipped", "not for this workload")
    assert status["lines"][0] == "unavailable"
    assert "pip install line_profiler" in status["lines"][1]
    assert status["framework"][0] == "failed"
    assert "collector exploded" in status["framework"][1]
    # remove() raised: the phase was given its chance to clean up, and the run went on.
    assert _Breaks.aborted
    hooks = trace.phase("hooks")
    assert hooks.status == "ok" and hooks.data == {"n": 7}
    # Re-warm steps are wrapped too but not recorded: 3 re-warm + 7 window steps.
    assert len(_Wraps.seen) == 10
    assert _Wraps.seen == list(range(_Wraps.seen[0], _Wraps.seen[0] + 10))
    assert hooks.window.rewarm_steps == 3 and hooks.window.n_steps == 7


def test_budget_aims_at_target_seconds_within_bounds():
    b = Budget(target_s=1.0, min_steps=100, max_steps=5000)
    assert b.steps_for(1_000_000) == 1000  # 1 ms steps -> 1,000 steps for 1 s
    assert b.steps_for(10) == 5000
    assert b.steps_for(10**9) == 100
    assert Budget(1.0, 100, 5000, steps=7).steps_for(1) == 7


def test_marker_cost_with_a_real_clock_is_small_and_positive():
    import time

    cost = marker_cost_ns(time.perf_counter_ns)
    # A call plus one list append of a timestamp: tens to a few hundred ns, never microseconds.
    assert 0 < cost < 2_000

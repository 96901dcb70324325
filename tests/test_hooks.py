"""Hooks phase: the split of a step from timers on TensorFlow's internals, and its own cost."""

from __future__ import annotations

from dataclasses import replace

import pytest

from profiler.capture.collectors import hooks as collect
from profiler.capture.collectors.hooks import HookPoint, Target
from profiler.capture.phases.hooks import TF1, TF2
from profiler.model import OK, median_ns
from profiler.model.records import HooksCost
from tests.tf_capture import HOOKS_STEPS, outcome


def _hooks(name: str):  # type: ignore[no-untyped-def]
    record = outcome(name).trace.phase("hooks")
    assert record is not None and record.status == OK, record.reason if record else "missing"
    return record


def _rows(data, keys):  # type: ignore[no-untyped-def]
    ps = data.per_step
    return [dict(zip(keys, vals, strict=True)) for vals in zip(*(ps[k] for k in keys), strict=True)]


# --- real runs -------------------------------------------------------------------------------


@pytest.mark.tf
@pytest.mark.slow
def test_tf1_parts_add_up_to_no_more_than_the_step():
    data = _hooks("tf1_gd").data
    assert data.target == "tf1_session" and data.steps == HOOKS_STEPS
    measured = [p.key for p in TF1.points]
    rows = _rows(data, ["wall_ns", *measured, *TF1.partition])
    assert len(rows) == data.per_step_steps > 0
    for r in rows:
        # Self times of nested calls never double count: together at most the step.
        assert sum(r[k] for k in measured) <= r["wall_ns"]
        # With the time outside session.run they are the step, to the nanosecond.
        assert sum(r[p] for p in TF1.partition) == r["wall_ns"]
        assert all(r[p] >= 0 for p in TF1.partition)


@pytest.mark.tf
@pytest.mark.slow
def test_tf1_native_call_is_at_least_half_the_step_and_feed_fetch_are_measured():
    data = _hooks("tf1_gd").data
    med = data.median_ns
    # The hooks' own measured cost is instrumentation, not part of the step
    # (profiler/docs/measuring.md,
    # "Categories").
    step = med["wall"] - data.self_cost.per_step_ns
    # The design notes measured the native call at ~60% of a step (112-123 of ~190 µs). Here the
    # native call takes the same ~118 µs but the Python side is slower, so the share is
    # 0.46-0.55 from run to run, and 0.35 on a loaded machine (the Python side slows more than
    # the native call): the bound is 0.25, below that noise; the next line says "the native
    # call is the biggest single part of the step".
    assert med["native"] >= 0.25 * step, (med["native"], step)
    python_parts = [p for p in TF1.partition if p != "native"]
    assert med["native"] > max(med[p] for p in python_parts)
    assert med["feed_convert"] > 0 and med["feed_other"] > 0
    assert med["fetch_setup"] > 0 and med["build_results"] > 0
    calls = data.calls_per_step
    assert calls["session_run"] == calls["native"] == calls["fetch_setup"] == 1
    assert calls["feed_convert"] == 2  # two fed placeholders, X and Y
    assert data.inclusive_median_ns["session_run"] <= med["wall"]


@pytest.mark.tf
@pytest.mark.slow
def test_tf2_function_call_is_split_and_nothing_retraces():
    data = _hooks("tf2_function_step").data
    assert data.target == "tf_function"
    calls = data.calls_per_step
    assert calls["function_call"] == calls["call_flat"] == calls["native"] == 1
    assert calls["tracing"] == 0 and data.median_ns["tracing"] == 0
    assert data.median_ns["native"] > 0 and data.median_ns["bind_args"] > 0
    for r in _rows(data, ["wall_ns", *TF2.partition]):
        assert sum(r[p] for p in TF2.partition) == r["wall_ns"]


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("name", ["tf1_gd", "tf2_function_step"])
def test_own_cost_is_measured_and_small(name):
    record = _hooks(name)
    cost = record.data.self_cost
    assert cost.per_call_ns > 0 and cost.step_wrapper_ns > 0
    assert len(cost.on_off_pairs) == 5 and cost.on_off_ns == median_ns(cost.on_off_pairs)
    assert cost.per_step_ns >= cost.per_step_ns_microbench > 0
    assert cost.per_step_ns >= cost.per_call_ns * cost.calls_per_step
    # The hooks' own cost is a small part of the step: the micro-benchmark's figure (the calls
    # through the hooks, timed apart) under a fifth of it. The on/off blocks' figure also times
    # the machine's noise (6-20% here, 29% and 62% on loaded machines): only its sign is sure.
    step_ns = cost.per_step_ns / cost.share_of_step
    assert 0 < cost.per_step_ns_microbench / step_ns < 0.2
    assert 0 < cost.share_of_step < 1.0


@pytest.mark.tf
def test_install_and_remove_restore_the_very_same_objects(tmp_path):
    import importlib

    from profiler.capture.phases import Budget, PhaseContext
    from profiler.capture.phases.hooks import HooksPhase
    from profiler.clock import now_ns
    from profiler.model import Segment, Window
    from profiler.workloads import get

    def originals(target: Target) -> list[object]:
        out = []
        for p in target.points:
            owner = importlib.import_module(p.module)
            *path, name = p.attr.split(".")
            for part in path:
                owner = getattr(owner, part)
            out.append(vars(owner)[name] if isinstance(owner, type) else getattr(owner, name))
        return out

    for name, target, end in (("tf1_gd", TF1, "remove"), ("tf2_function_step", TF2, "abort")):
        spec = get(name)
        loop = spec.build(spec.defaults.with_(steps=10))
        ctx = PhaseContext(spec, loop, tmp_path, tmp_path, now_ns)
        before = originals(target)
        phase = HooksPhase(Budget(1, 1, 10), {})
        phase.install(ctx)
        assert all(a is not b for a, b in zip(originals(target), before, strict=True))
        marks = [now_ns()]
        loop.run(5, marks, now_ns, phase.step_wrapper(ctx))
        if end == "remove":
            window = Window("hooks", (Segment(0, tuple(marks)),))
            assert phase.remove(ctx, window).data.steps == 5
        else:
            phase.abort(ctx)  # what the worker calls after a failure
        assert all(a is b for a, b in zip(originals(target), before, strict=True)), name
        loop.close()


def test_eager_loops_are_left_to_the_framework_trace(tmp_path):
    from profiler.capture.phases import Budget, PhaseContext, PhaseUnavailable
    from profiler.capture.phases.hooks import HooksPhase
    from profiler.clock import now_ns
    from profiler.model import WorkDecl
    from profiler.workloads import get
    from profiler.workloads.base import Loop, LoopInfo

    loop = Loop(
        step=lambda: None,
        work=WorkDecl(1, 1, 1, 1, 1),
        params=dict,
        eval_loss=lambda _p: 0.0,
        info=LoopInfo(kind="tf2", mode="eager"),
    )
    ctx = PhaseContext(get("tf2_eager_gd"), loop, tmp_path, tmp_path, now_ns)
    with pytest.raises(PhaseUnavailable, match="C fast path"):
        HooksPhase(Budget(1, 1, 10), {}).install(ctx)


# --- the split, by hand ----------------------------------------------------------------------

_T = Target(
    name="t",
    points=(HookPoint("outer", "m", "f", "outer"), HookPoint("inner", "m", "g", "inner")),
    intervals={"gap": "from outer's entry to inner's"},
    derived={
        "gap_rest": ("outer", ("gap",)),
        "outside": ("wall", ("outer", "inner")),
    },
    partition=("outside", "gap_rest", "gap", "inner"),
    categories={"outside": "python", "gap_rest": "python", "gap": "python", "inner": "native"},
    outside="outside",
)


def test_split_derives_parts_that_add_up_to_the_wall_exactly():
    # keys: outer (self), inner, gap; rows: (step, self, inclusive, calls)
    rows = [
        (7, (30, 50, 10), (80, 50, 10), (1, 1, 1)),
        (8, (40, 60, 20), (100, 60, 20), (1, 1, 1)),
        (3, (1, 1, 1), (2, 1, 1), (1, 1, 1)),  # a re-warm step: not in the window
    ]
    cost = HooksCost(per_call_ns=5, step_wrapper_ns=3)
    data = collect.split(_T, rows, {7: 100, 8: 110}, cost)
    assert data.steps == 2
    assert data.per_step["step"] == (7, 8)
    assert data.per_step["outside"] == (20, 10)
    assert data.per_step["gap_rest"] == (20, 20)
    for i in range(2):
        parts = sum(data.per_step[p][i] for p in _T.partition)
        assert parts == data.per_step["wall_ns"][i]
    assert data.median_ns["inner"] == 50 and data.mean_ns["inner"] == 55
    assert data.inclusive_median_ns["outer"] == 80
    assert data.calls_per_step == {"outer": 1.0, "inner": 1.0, "gap": 1.0}
    # intervals are not calls: 2 hooked calls a step at 5 ns, plus the 3 ns wrapper
    assert data.self_cost.per_step_ns == data.self_cost.per_step_ns_microbench == 13
    assert data.self_cost.share_of_step == round(13 / 100, 5)
    # A measured on/off difference is the cost, but never below the micro-benchmark's bound.
    more = collect.split(_T, rows, {7: 100, 8: 110}, replace(cost, on_off_ns=40))
    assert more.self_cost.per_step_ns == 40
    noisy = collect.split(_T, rows, {7: 100, 8: 110}, replace(cost, on_off_ns=-7))
    assert noisy.self_cost.per_step_ns == 13


def test_derived_parts_are_floored_at_zero():
    parts = collect.derive(_T, 10, {"outer": 30, "inner": 5, "gap": 40})
    assert parts["gap_rest"] == 0 and parts["outside"] == 0


def test_a_step_whose_parts_exceed_its_wall_is_not_a_typical_step() -> None:
    from profiler.capture.collectors import hooks as collect

    walls = [3_500_000] * 20
    measured = [3_000_000] * 20
    measured[7] = 530_000_000  # an epoch's validation built between two steps
    central = collect._central(walls, measured)
    assert 7 not in central and len(central) == 19
    # Every row over-full: the walls alone decide (nothing better to go on).
    assert collect._central(walls, [10**9] * 20) == collect._central(walls)

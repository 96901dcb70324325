"""The trace model: invariants, derived steps and counters, JSON round trip."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.model import (
    Frame,
    Gap,
    LineStat,
    MetricPoint,
    ModelError,
    PhaseRecord,
    Sample,
    Segment,
    Span,
    Window,
    WorkDecl,
    WorkloadTrace,
    from_jsonable,
    median_ns,
    percentile_ns,
    to_jsonable,
)
from profiler.model.records import (
    FeedCast,
    FrameworkData,
    HookDoc,
    HooksCost,
    HooksData,
    OpRow,
    OpTable,
    ProfilerSession,
    StepColumns,
    StepMedians,
)

WORK = WorkDecl(
    samples_per_step=32,
    updates_per_step=1,
    steps_per_epoch=130,
    flops_per_step=1,
    bytes_per_step=1,
)


def test_segment_durations_are_back_to_back_differences():
    seg = Segment(first_step=5, boundaries_ns=(100, 250, 260, 1000))
    assert seg.n_steps == 3
    assert seg.durations_ns() == (150, 10, 740)
    assert (seg.start_ns, seg.end_ns) == (100, 1000)


def test_segment_rejects_time_going_backwards():
    with pytest.raises(ModelError, match="backwards at 2"):
        Segment(first_step=0, boundaries_ns=(0, 10, 5))


def test_workdecl_rejects_zero_counts():
    with pytest.raises(ModelError, match="steps_per_epoch"):
        WorkDecl(1, 1, 0, 1, 1)


def test_window_steps_carry_cumulative_counters():
    w = Window(
        phase="timed",
        segments=(Segment(128, (0, 10, 30)), Segment(130, (50, 80))),
        gaps=(Gap(30, 20, "metric"),),
    )
    steps = list(w.steps(WORK))
    assert [s.index for s in steps] == [128, 129, 130]
    assert [s.dur_ns for s in steps] == [10, 20, 30]
    assert [s.samples for s in steps] == [129 * 32, 130 * 32, 131 * 32]
    assert [s.updates for s in steps] == [129, 130, 131]
    # Step 129 is the last of epoch 0 (130 steps an epoch); step 130 starts epoch 1.
    assert [s.epoch for s in steps] == [0, 0, 1]
    assert w.gap_ns == 20
    assert w.n_steps == 3


def test_epoch_counts_training_steps_for_multi_step_units():
    k_work = WorkDecl(100 * 1000, 100, 1, 1, 1, units_per_step=100)
    steps = list(Window("timed", (Segment(0, (0, 5, 9)),)).steps(k_work))
    assert [s.epoch for s in steps] == [0, 100]
    assert steps[1].updates == 200


def test_median_and_percentiles_are_exact_integers():
    values = (5, 1, 4, 2, 3, 100)
    assert median_ns(values) == 3  # lower median of an even count
    assert percentile_ns(values, 10) == 1
    assert percentile_ns(values, 90) == 100
    assert percentile_ns(values, 50) == 3
    with pytest.raises(ModelError):
        median_ns(())


def _trace() -> WorkloadTrace:
    return WorkloadTrace(
        workload="w",
        params={"steps": 2, "n": 3, "seed": 0, "k": 1},
        work=WORK,
        build_ns=7,
        warmup=Window("warmup", (Segment(0, (0, 1, 2)),)),
        phases=(
            PhaseRecord(
                name="timed",
                status="ok",
                window=Window("timed", (Segment(2, (10, 20, 35)),), rewarm_steps=0),
                spans=(Span("SessionRun", 10, 5, track="python", step=2, category="dispatch"),),
                samples=(Sample((Frame("main", "a.py", 1), Frame("f", native=True)), 3, "t"),),
                lines=(LineStat("a.py", 3, "step", 10, 400, "x = 1"),),
            ),
            PhaseRecord(name="sampled", status="unavailable", reason="no py-spy"),
            PhaseRecord(
                name="framework",
                status="ok",
                data=FrameworkData(
                    profiler=ProfilerSession({"host_tracer_level": 2}, 5, 6, "x.pb", 10),
                    steps=StepColumns(step=(2, 3), wall_ns=(10, 15)),
                    median_ns=StepMedians(wall_ns=10),
                    op_table=OpTable(
                        "xplane",
                        2,
                        30,
                        15,
                        "a",
                        "MatMul",
                        1.0,
                        (OpRow("a", "MatMul", 2, 15, 30, 1.0),),
                        0,
                    ),
                ),
            ),
            PhaseRecord(
                name="hooks",
                status="ok",
                data=HooksData(
                    target="t",
                    hooks={"native": HookDoc("m.f", "the call")},
                    steps=2,
                    partition=("outside", "native"),
                    categories={"outside": "python", "native": "native"},
                    outside="outside",
                    median_ns={"native": 4},
                    mean_ns={"native": 4},
                    central_mean_ns={"native": 4},
                    inclusive_median_ns={"native": 4},
                    calls_per_step={"native": 1.0},
                    per_step={"step": (2, 3), "native": (4, 4)},
                    per_step_steps=2,
                    self_cost=HooksCost(per_call_ns=3, on_off_pairs=(1, 2)),
                    feed_cast=FeedCast(7, ("float64",), "float32", "m"),
                ),
            ),
        ),
        metrics=(MetricPoint(-1, "loss", 2.5), MetricPoint(3, "loss", 1.25, cost_ns=40)),
        marker_cost_ns=90,
        final={"W": 0.5},
    )


def test_trace_json_round_trip_is_identity(tmp_path):
    t = _trace()
    back = from_jsonable(WorkloadTrace, to_jsonable(t))
    assert back == t
    assert back.phases[0].samples[0].frames[1].native is True
    assert back.phase("sampled").reason == "no py-spy"
    # Each phase's record comes back as its own type (``PHASE_DATA``), nested records too.
    hooks = back.data("hooks")
    assert isinstance(hooks, HooksData) and isinstance(hooks.hooks["native"], HookDoc)
    assert hooks.self_cost.on_off_pairs == (1, 2) and hooks.per_step["native"] == (4, 4)
    fw = back.data("framework")
    assert isinstance(fw, FrameworkData) and fw.op_table.rows[0].kernel == "MatMul"
    assert back.data("sampled") is None  # not ok: no record
    t.save(tmp_path / "model.json.gz")
    assert WorkloadTrace.load(tmp_path / "model.json.gz") == t


@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=50))
def test_segment_round_trip_and_total(increments: list[int]):
    bounds = [0]
    for inc in increments:
        bounds.append(bounds[-1] + inc)
    seg = Segment(3, tuple(bounds))
    assert sum(seg.durations_ns()) == seg.end_ns - seg.start_ns
    assert from_jsonable(Segment, to_jsonable(seg)) == seg


def test_text_from_the_script_leaves_the_trace_encodable(tmp_path):
    # os.fsdecode(b"caf\xe9.py") and a message holding another lone surrogate (text.shown).
    t = dataclasses.replace(
        _trace(),
        workload="caf\udce9.py",
        error="bad \udcff \ud800 é",
        script={"p\udcfe": ["x\udce9"]},
    )
    t.save(tmp_path / "model.json.gz")
    back = WorkloadTrace.load(tmp_path / "model.json.gz")
    assert back.workload == "caf\\xe9.py" and back.error == "bad \\xff \\ud800 é"
    assert back.script == {"p\\xfe": ["x\\xe9"]}

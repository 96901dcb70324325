"""Attribution: exact ns per category on hand-built traces, and its properties."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.analysis import attribution
from profiler.capture.collectors.pyspy import MAIN_THREAD
from profiler.model import (
    CATEGORIES,
    PhaseRecord,
    Sample,
    Segment,
    Window,
    WorkDecl,
    WorkloadTrace,
)
from profiler.model.records import StepMedians
from profiler.reports import summary
from tests.builders import framework_data, hooks_data, sampled_data
from tests.test_rules import NP_STEP, NP_SUM, NUMPY_SO, TF1_DO_RUN, nat, py

WORK = WorkDecl(1000, 1, 1, 15_000, 120_000)


def _window(phase: str, durations: list[int], first: int = 0) -> Window:
    bounds = [1_000_000]
    for d in durations:
        bounds.append(bounds[-1] + d)
    return Window(phase, (Segment(first, tuple(bounds)),))


def _trace(timed: list[int], *phases: PhaseRecord, work: WorkDecl = WORK) -> WorkloadTrace:
    return WorkloadTrace(
        workload="w",
        params={},
        work=work,
        build_ns=0,
        warmup=_window("warmup", [1000] * 3),
        phases=(PhaseRecord("timed", "ok", window=_window("timed", timed, 3)), *phases),
    )


#: A hooks phase whose typical step is: outside 100, feed conversion 250, native 400, rest 150
#: (ns), with the hooks costing 100 ns a step.
HOOKS = PhaseRecord(
    "hooks",
    "ok",
    window=_window("hooks", [900] * 5, 100),
    data=hooks_data(
        {"outside_run": 100, "feed_convert": 250, "native": 400, "run_rest": 150},
        {
            "outside_run": "python",
            "feed_convert": "feed_fetch",
            "native": "native",
            "run_rest": "python",
        },
        cost_ns=100,
        cast_ns=30,
        fetches=2,
        feeds=2,
    ),
)
#: Kernels: 150 ns of the native call; the executor spans 300 ns of it.
FRAMEWORK = PhaseRecord(
    "framework",
    "ok",
    window=_window("framework", [1000] * 5, 200),
    data=framework_data(kernel_union_ns=150, executor_ns=300),
)
# Reference: the mean of the steps between p10 and p90 of these is 1,000 ns.
TIMED = [1000] * 8 + [400, 5000]


def test_hooks_and_kernels_split_a_step_exactly_by_hand():
    att = attribution.attribute(_trace(TIMED, HOOKS, FRAMEWORK))
    assert att.method == "hooks+kernels"
    assert att.reference_ns == 1000
    # Native 400 absolute: kernels 150, the executor's per-op work 300 - 150, the call
    # 400 - 300. The Python side (500 ns, 400 without the hooks' cost) is split by its shares
    # (outside 1/5, feed 1/2, rest 3/10) over the timed step less the native call: 600 ns.
    assert att.typical == {
        "compute": 150,
        "dispatch": 250,
        "feed_fetch": 300,
        "python": 300,
        "tracing": 0,
        "communication": 0,
        "other": 0,
    }
    assert att.parts["dispatch.per_op"] == 150 and att.parts["dispatch.per_call"] == 100
    assert att.parts["feed_fetch.feed"] == 300
    assert att.parts["feed_fetch.cast"] == 30
    # A step as long as the reference keeps the parts; a longer one puts its excess in other;
    # a shorter one gets the parts scaled to it.
    assert att.steps[0] == (150, 250, 300, 300, 0, 0, 0)
    assert att.steps[9] == (150, 250, 300, 300, 0, 0, 4000)
    assert att.steps[8] == (60, 100, 120, 120, 0, 0, 0)
    assert att.overhead_share == pytest.approx(0.85)
    # The hooks window (less the hooks' cost: 800 ns) ran 20% faster than the timed one.
    assert any("20% faster than the timed window" in n for n in att.notes)


def test_without_kernel_time_the_native_call_is_other_and_says_so():
    att = attribution.attribute(_trace(TIMED, HOOKS))
    assert att.typical["compute"] == 0 and att.typical["dispatch"] == 0
    assert att.typical["other"] == 400
    assert any("were not measured" in n for n in att.notes)
    assert set(att.not_measured) == {"compute", "dispatch"}


def test_a_slower_hooks_window_is_drift_the_python_side_takes_its_shares():
    att = attribution.attribute(_trace([500] * 10, HOOKS, FRAMEWORK))
    assert sum(att.typical.values()) == 500
    assert att.typical["other"] == 0
    # Native 400 absolute; the 100 ns left split 1/5, 1/2, 3/10.
    assert (att.typical["python"], att.typical["feed_fetch"]) == (50, 50)
    assert any("60% slower than the timed window" in n for n in att.notes)


def test_a_native_call_longer_than_the_step_is_scaled_with_its_window_and_noted():
    # The hooks window (800 ns without the hooks' cost) ran 2.7x the timed step (300 ns): its
    # native call alone (400) would overfill the step, so the window is scaled as a whole.
    att = attribution.attribute(_trace([300] * 10, HOOKS, FRAMEWORK))
    assert sum(att.typical.values()) == 300
    native = att.typical["compute"] + att.typical["dispatch"]
    assert native == 150  # 400 x 300 / 800
    assert att.typical["python"] + att.typical["feed_fetch"] == 150
    # The capture's kernels (150 ns) fill the scaled native call.
    assert att.typical["compute"] == 150 and att.typical["dispatch"] == 0
    assert any("scaled to the timed step" in n for n in att.notes)


def test_removal_predictions_sum_parts_and_whole_categories_once():
    att = attribution.attribute(_trace(TIMED, HOOKS, FRAMEWORK))
    assert attribution.removal_ns(att, ("feed_fetch.feed",)) == 300
    assert attribution.removal_ns(att, ("python", "feed_fetch", "dispatch.per_call")) == 700
    # A part of a category removed whole is not counted twice.
    assert attribution.removal_ns(att, ("feed_fetch", "feed_fetch.cast")) == 300


def _sampled(stacks: list[tuple[tuple, int]]) -> PhaseRecord:
    return PhaseRecord(
        "sampled",
        "ok",
        window=_window("sampled", [1000] * 5, 300),
        samples=tuple(Sample(frames, n, MAIN_THREAD) for frames, n in stacks),
        data=sampled_data(rate_hz=100),
    )


def test_kernels_keep_at_most_their_share_of_the_native_call_in_the_capture():
    # A slow capture window: kernels 300 ns of a 400 ns SessionRun there (75%); the hooks'
    # native call is 400 ns: kernels at most 75% of it, not their absolute 300 + 150.
    fw = PhaseRecord(
        "framework",
        "ok",
        data=replace(
            framework_data(kernel_union_ns=450, executor_ns=500),
            median_ns=StepMedians(kernel_union_ns=450, executor_ns=500, run_call_ns=600),
        ),
    )
    att = attribution.attribute(_trace(TIMED, HOOKS, fw))
    assert att.typical["compute"] == 300  # 400 x 450 / 600


def test_samples_give_shares_of_the_timed_step():
    compute = (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO), nat("DOUBLE_add", NUMPY_SO))
    dispatch = (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO))
    python = NP_STEP
    rec = _sampled([(compute, 20), (dispatch, 50), (python, 30)])
    att = attribution.attribute(_trace([2000] * 10, rec))
    assert att.method == "samples"
    assert att.typical == {
        "compute": 400,
        "dispatch": 1000,
        "feed_fetch": 0,
        "python": 600,
        "tracing": 0,
        "communication": 0,
        "other": 0,
    }


def test_samples_waiting_in_a_datasets_next_are_the_input_part_of_feed_fetch():
    # An eager loop over a dataset from a generator (the tf.data guide's): the main thread in
    # iterator_get_next 30% of the step. The input diagnoses read the part: without it, no
    # input finding fired.
    get_next = (
        *NP_STEP,
        py("OwnedIterator.__next__", "tensorflow/python/data/ops/iterator_ops.py"),
        py("iterator_get_next", "tensorflow/python/ops/gen_dataset_ops.py"),
    )
    rec = _sampled([(get_next, 30), (NP_STEP, 70)])
    att = attribution.attribute(_trace([2000] * 10, rec))
    assert att.typical["feed_fetch"] == 600 and att.typical["python"] == 1400
    assert att.parts["feed_fetch.input"] == 600


def test_native_session_samples_are_resolved_by_kernel_time():
    native = (*TF1_DO_RUN, py("BaseSession._call_tf_sessionrun", TF1_DO_RUN[-1].file, 1483))
    rec = _sampled([(native, 60), (TF1_DO_RUN, 40)])
    att = attribution.attribute(_trace([1000] * 10, rec, FRAMEWORK))
    assert att.method == "samples+kernels"
    # 600 ns inside the session call: 150 kernels, 150 executor, 300 the call.
    assert att.typical["compute"] == 150
    assert att.typical["dispatch"] == 450
    assert sum(att.typical.values()) == 1000


def test_no_sources_leave_the_whole_step_other():
    att = attribution.attribute(_trace([700] * 4))
    assert att.method == "none"
    assert att.typical["other"] == 700
    assert att.steps == ((0, 0, 0, 0, 0, 0, 700),) * 4


def test_units_of_k_steps_are_split_per_unit_and_reported_per_step():
    k = 10
    work = WorkDecl(10_000, k, 1, 150_000, 1, units_per_step=k)
    att = attribution.attribute(_trace([10_000] * 10, work=work))
    assert att.reference_ns == 1_000
    assert att.steps[0] == (0, 0, 0, 0, 0, 0, 10_000)
    assert summary._attribution_obj(att, [])["typical_us"]["other"] == 1.0


def test_summary_object_has_shares_that_add_to_one():
    s = summary._attribution_obj(attribution.attribute(_trace(TIMED, HOOKS, FRAMEWORK)), [])
    assert sum(s["share"].values()) == pytest.approx(1.0, abs=1e-4)
    assert s["typical_us"]["compute"] == 0.15
    assert s["steps"] == 10
    assert s["sources"]["compute"][0].startswith("kernels")
    assert "hooks' measured cost, 0.1 µs/step" in s["sources"]["python"][0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=2_000),
    st.integers(min_value=0, max_value=2_000),
    st.integers(min_value=0, max_value=2_000),
)
def test_conservation_and_non_negativity(timed, native, feed, kern):
    central = {"outside_run": 10, "feed_convert": feed, "native": native, "run_rest": 5}
    hooks = PhaseRecord("hooks", "ok", data=replace(HOOKS.data, central_mean_ns=central))
    fw = PhaseRecord("framework", "ok", data=framework_data(kern, kern * 2))
    att = attribution.attribute(_trace(timed, hooks, fw))
    for row, d in zip(att.steps, timed, strict=True):
        assert sum(row) == d
        assert min(row) >= 0
    assert sum(att.typical.values()) == att.reference_ns
    assert min(att.typical.values()) >= 0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10**6), min_size=2, max_size=40), st.randoms())
def test_order_invariance(timed, rnd: random.Random):
    shuffled = list(timed)
    rnd.shuffle(shuffled)
    a = attribution.attribute(_trace(timed, HOOKS, FRAMEWORK))
    b = attribution.attribute(_trace(shuffled, HOOKS, FRAMEWORK))
    assert a.typical == b.typical
    assert sorted(a.steps) == sorted(b.steps)


def test_conservation_error_is_explicit():
    assert issubclass(attribution.ConservationError, ArithmeticError)
    assert set(CATEGORIES) == set(attribution.EXPLAINED) | {"other"}


def test_a_much_faster_hooks_window_is_scaled_whole_not_left_to_the_python_side():
    # Timed steps 1600 ns, the hooks window 800 ns without the hooks' cost (50% faster): the
    # native call (400 there) is scaled to 800, the Python side (400) to 800, not 1200.
    att = attribution.attribute(_trace([1600] * 10, HOOKS, FRAMEWORK))
    assert sum(att.typical.values()) == 1600
    assert att.typical["compute"] + att.typical["dispatch"] == 800
    assert att.typical["python"] + att.typical["feed_fetch"] == 800
    assert any("ran 0.50x the timed window's" in n for n in att.notes)


def test_kernels_of_a_faster_capture_window_are_their_share_not_their_time():
    # Issue 23's convolution: one 52 ms kernel that is the whole call in the capture window
    # (the machine was quieter then), a 70 ms call and step in the timed and hooks windows.
    # Kernels are their share of the call (100%), never 52 ms of a 70 ms call with 18 ms
    # booked as dispatch.
    ms = 1_000_000
    hooks = PhaseRecord(
        "hooks",
        "ok",
        window=_window("hooks", [70 * ms] * 5, 100),
        data=hooks_data({"native": 70 * ms}, {"native": "native"}, cost_ns=0),
    )
    fw = PhaseRecord(
        "framework",
        "ok",
        window=_window("framework", [52 * ms] * 5, 200),
        data=replace(
            framework_data(kernel_union_ns=52 * ms, executor_ns=52 * ms),
            median_ns=StepMedians(
                kernel_union_ns=52 * ms, executor_ns=52 * ms, run_call_ns=52 * ms
            ),
        ),
    )
    att = attribution.attribute(_trace([70 * ms] * 10, hooks, fw))
    assert att.typical["compute"] == 70 * ms
    assert att.typical["dispatch"] == 0


def test_kernels_alone_take_the_native_calls_share_of_their_own_window():
    # Only the framework capture: its steps took 60 ms, the call 54 ms of them (90%), kernels
    # 48 ms (80% of the call); the timed step, measured at another moment, is 80 ms.
    ms = 1_000_000
    fw = PhaseRecord(
        "framework",
        "ok",
        window=_window("framework", [60 * ms] * 5, 200),
        data=replace(
            framework_data(kernel_union_ns=48 * ms, executor_ns=50 * ms),
            median_ns=StepMedians(
                kernel_union_ns=48 * ms, executor_ns=50 * ms, run_call_ns=54 * ms
            ),
        ),
    )
    att = attribution.attribute(_trace([80 * ms] * 10, fw))
    assert att.typical["compute"] == 80 * ms * 9 // 10 * 8 // 9  # 90% of 80, then 48/54 of that
    assert att.typical["other"] == 8 * ms


def test_the_native_calls_wait_while_tf_data_threads_run_python_is_input() -> None:
    # The hooks+kernels step above (its native call's per-call part: 100 ns), sampled while a
    # tf.data thread ran the script's generator in 60 of 100 main-thread ticks: 60 ns of that
    # per-call time is waiting for the input, named with the script's function.
    script_ops = "/venv/site-packages/tensorflow/python/ops/script_ops.py"
    gen = (
        py("FuncRegistry.__call__", script_ops, 269),
        py("DataGenerator.__getitem__", "/home/u/train.py", 73),
        py("load", "/venv/site-packages/numpy/lib/_npyio_impl.py", 483),
    )
    samples = (
        Sample(TF1_DO_RUN, 100, MAIN_THREAD),
        Sample(gen, 45, "thread 12"),
        Sample(gen, 15, "thread 13"),
        Sample((py("run", "/usr/lib/python3.11/threading.py", 9),), 100, "helper 14"),
    )
    sampled = PhaseRecord(
        "sampled",
        "ok",
        window=_window("sampled", [1000] * 5, 300),
        samples=samples,
        data=sampled_data(),
    )
    att = attribution.attribute(_trace(TIMED, HOOKS, FRAMEWORK, sampled))
    assert att.parts["feed_fetch.input_python"] == 60 and att.parts["dispatch.per_call"] == 40
    assert sum(att.typical.values()) == att.reference_ns
    assert any("DataGenerator.__getitem__ (train.py)" in s for s in att.sources["feed_fetch"])
    # Under a fifth of the ticks: left as dispatch.
    few = replace(sampled, samples=(samples[0], Sample(gen, 10, "thread 12")))
    att = attribution.attribute(_trace(TIMED, HOOKS, FRAMEWORK, few))
    assert "feed_fetch.input_python" not in att.parts and att.parts["dispatch.per_call"] == 100


def test_the_typical_step_leaves_out_an_epochs_slow_first_batch_even_one_in_eight() -> None:
    from profiler.analysis.attribution import central_mean
    from profiler.model import central_bounds

    # A tabular fit's 8-batch epochs: 2 ms batches, each epoch's first 176 ms (validation and
    # the next epoch's set-up): one step in 8, more than the tenth the trim leaves out, read a
    # typical step of 25 ms and "a batch is 25,326 µs".
    steps = [176_000_000 if i % 8 == 0 else 2_000_000 + 1_000 * (i % 8) for i in range(37)]
    assert central_bounds(steps)[1] <= 3 * 2_004_000
    assert 2_000_000 <= central_mean(steps) <= 2_010_000
    # Half the steps slow: the trim alone (the cap would leave out half of them).
    halves = [1_000_000, 9_000_000] * 20
    assert central_mean(halves) == 5_000_000
    # Under a tenth: the 10-90 trim, as before.
    few = [1_000_000] * 19 + [50_000_000]
    assert central_mean(few) == 1_000_000


def test_a_faster_hooks_window_whose_drift_would_swamp_its_python_side_is_scaled():
    # TF's DCGAN tutorial: a 1.3 s step 99.8% inside the graph call (measured), its hooks
    # window 18% faster than the timed one; taken absolute, the native call left "Python 299
    # ms (23%)". Here: native 900, Python side 100 (outside the call), the hooks costing 0,
    # against a timed step of 1,220 ns: the 220 ns of drift would more than triple it.
    hooks = PhaseRecord(
        "hooks",
        "ok",
        window=_window("hooks", [1000] * 5, 100),
        data=hooks_data(
            {"outside_run": 100, "native": 900},
            {"outside_run": "python", "native": "native"},
            cost_ns=0,
        ),
    )
    att = attribution.attribute(_trace([1220] * 10, hooks, FRAMEWORK))
    assert sum(att.typical.values()) == 1220
    # Scaled as a whole: the Python side keeps its tenth of the step.
    assert att.typical["python"] == 122, att.typical
    assert any("ran 0.82x the timed window's" in n for n in att.notes), att.notes


def test_a_step_compiled_with_xla_is_compute_where_the_tracer_sees_no_kernels() -> None:
    # Keras's image classification example compiles with jit_compile=True: on a CPU the
    # tracer sees none of XLA's kernels, and its 1 s step read "0 µs of kernels, dispatch 82%:
    # the graph executor's cost per op", its fix the XLA it had on.
    medians = StepMedians(kernel_union_ns=0, executor_ns=380, run_call_ns=400)
    fw = PhaseRecord(
        "framework",
        "ok",
        window=_window("framework", [1000] * 5, 200),
        data=replace(framework_data(0, 380), median_ns=medians),
    )
    plain = _trace(TIMED, HOOKS, fw)
    xla = replace(plain, script={"fit": {"jit_compile": True}})
    assert attribution.xla_compiled(xla) == "compile(jit_compile=True)"
    assert attribution.xla_compiled(plain) == ""
    k = attribution.kernels(xla)
    # The native call, whose 380 ns the executor spans: all of it XLA's code.
    assert k is not None and k.compute_ns == 400 and "XLA-compiled" in k.source
    att = attribution.attribute(xla)
    assert att is not None
    assert att.typical["compute"] == 400 and att.typical["dispatch"] == 0
    assert sum(att.typical.values()) == 1000
    # Not compiled with XLA: no kernels are no kernels.
    att = attribution.attribute(plain)
    assert att is not None and att.typical["compute"] == 0 and att.typical["dispatch"] == 400
    # A step function of the script's own, made with tf.function(jit_compile=True).
    fns = [
        {"name": "train_step", "own": True, "calls": 500, "jit_compile": True},
        {"name": "test_step", "own": True, "calls": 40, "jit_compile": False},
    ]
    own = replace(plain, script={"functions": fns})
    assert attribution.xla_compiled(own) == "train_step: tf.function(jit_compile=True)"

"""The sampled phase: py-spy capture parsing, the flame graph, the analysis, attaching (and failing
to), and real runs of numpy_gd and tf1_gd."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from profiler.analysis import sampling
from profiler.analysis import stacks as rules
from profiler.analysis.run import analyse_workload
from profiler.capture.collectors import pyspy
from profiler.capture.phases import Budget, PhaseUnavailable
from profiler.capture.phases import sampled as sampled_mod
from profiler.capture.phases.lines import LinesPhase
from profiler.capture.phases.sampled import SampledPhase
from profiler.capture.phases.timed import TimedPhase
from profiler.capture.worker import run_workload
from profiler.model import Frame, Sample
from profiler.processes.runner import WorkloadOutcome
from profiler.reports import artefacts, flamegraph, summary
from profiler.workloads.base import Params
from tests import fake_workloads as fw
from tests import tracing_runs
from tests.own_files import (
    LOOP_FILE,
    SAMPLED_PHASE,
    SCHEDULE,
    SEGMENT,
    WORKER,
)


def _outcome(trace):  # type: ignore[no-untyped-def]
    return WorkloadOutcome(fw.QUICK, "quick", "ok", trace, params=Params(steps=50, n=8))


NUMPY_SO = "/venv/site-packages/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
SEGMENT = Frame(SEGMENT, SCHEDULE, 128)
LOOP = Frame("Loop.run", LOOP_FILE, 149)
STEP = Frame("build.<locals>.step", "/repo/profiler/workloads/numpy_gd.py", 56)


def _doc() -> dict:
    frames = [
        {"name": "thread (100)", "file": "", "line": 0, "col": None},  # 0: --threads pseudo
        {"name": "<module>", "file": WORKER, "line": 400, "col": None},
        {"name": SEGMENT, "file": SCHEDULE, "line": 128},
        {"name": "Loop.run", "file": LOOP_FILE, "line": 149},
        {"name": "build.<locals>.step", "file": "/repo/profiler/workloads/numpy_gd.py", "line": 56},
        {"name": "DOUBLE_subtract", "file": NUMPY_SO, "line": 0},  # 5
        {"name": "0x7f00aa", "file": LIBC, "line": 0},  # 6
        {"name": "run", "file": "/usr/lib/python3.11/threading.py", "line": 975},  # 7
    ]
    return {
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": 'Thread 100 "MainThread"',
                "samples": [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6], [1, 2]],
                "weights": [0.01] * 4,
            },
            {"type": "sampled", "name": 'Thread 101 "loader"', "samples": [[7]], "weights": [0.01]},
        ],
    }


def test_speedscope_becomes_samples() -> None:
    samples = pyspy.parse_speedscope(_doc(), main_tid=100)
    assert [(s.count, s.thread, len(s.frames)) for s in samples] == [
        (2, "main", 5),  # the pseudo frame is dropped; identical stacks aggregate
        (1, "loader 101", 1),
        (1, "main", 2),
        (1, "main", 6),
    ]
    kernel = samples[0].frames[-1]
    assert (kernel.function, kernel.native, kernel.line) == ("DOUBLE_subtract", True, 0)
    assert not samples[0].frames[-2].native
    assert samples[3].frames[-1].native  # an unresolved libc address
    # Without the main thread's id, threads keep their py-spy names.
    assert {s.thread for s in pyspy.parse_speedscope(_doc())} == {"MainThread 100", "loader 101"}
    # The first half of each thread's samples, in the order py-spy took them (the start-up
    # capture keeps those before the first step): the main thread's first two.
    head = pyspy.parse_speedscope(_doc(), main_tid=100, head=0.5)
    assert [(s.count, s.thread) for s in head if s.thread == "main"] == [(2, "main")]


def test_collapsed_text_round_trips() -> None:
    samples = pyspy.parse_speedscope(_doc(), main_tid=100)
    text = flamegraph.to_collapsed(samples)
    assert text.splitlines()[0].startswith(f"thread (main);<module> ({WORKER}:400)")
    assert text.splitlines()[0].endswith(f"DOUBLE_subtract ({NUMPY_SO}) 2")
    assert pyspy.parse_collapsed(text) == samples


def test_flame_graph_is_escaped_xml_with_a_tooltip_per_box() -> None:
    evil = Frame('<script>&"x"</script>', "/a/b<c>.py", 3)
    samples = (
        Sample((SEGMENT, LOOP, STEP, Frame("DOUBLE_add", NUMPY_SO, native=True)), 3, "main"),
        Sample((SEGMENT, LOOP, STEP, evil), 1, "main"),
    )
    svg = flamegraph.flame_svg(samples, rules.classify, title="t <&> t", width=420, min_px=0.0)
    assert "<script>" not in svg
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    boxes = root.findall("s:g", ns)
    # all, segment, Loop.run, step, and the two leaves: one box and one tooltip each.
    assert len(boxes) == 6
    tips = [b.find("s:title", ns).text for b in boxes]
    assert any(t.startswith('<script>&"x"</script>') for t in tips)
    widths = {
        b.find("s:title", ns).text.split("\n")[0]: float(b.find("s:rect", ns).get("width"))
        for b in boxes
    }
    assert widths["all"] == pytest.approx(400)
    leaf = pyspy.frame_label(Frame("DOUBLE_add", NUMPY_SO, native=True))
    assert widths[leaf] == pytest.approx(300)  # 3 of 4 samples
    # The kernel's box carries the compute colour.
    fills = {
        b.find("s:title", ns).text.split("\n")[0]: b.find("s:rect", ns).get("fill") for b in boxes
    }
    assert fills[leaf] == flamegraph.COLOURS["compute"]


def test_analysis_counts_main_thread_steps_only() -> None:
    kernel = Frame("DOUBLE_add", NUMPY_SO, native=True)
    wrapper = Frame("_wrapreduction", "/venv/site-packages/numpy/_core/fromnumeric.py", 83)
    setup = Frame("SampledPhase.install", SAMPLED_PHASE, 300)
    samples = (
        Sample((SEGMENT, LOOP, STEP, wrapper, kernel), 3, "main"),
        Sample((SEGMENT, LOOP, STEP, wrapper), 2, "main"),
        Sample((SEGMENT, LOOP, STEP), 1, "main"),
        Sample((setup,), 4, "main"),  # attaching: outside any step
        Sample((Frame("run", "/usr/lib/python3.11/threading.py", 975),), 5, "loader 7"),
    )
    a = sampling.analyse(samples)
    assert (a.total, a.outside_steps, a.other_threads, a.scoped) == (6, 4, {"loader 7": 5}, True)
    assert a.by_label == {"compute": 3, "dispatch": 2, "python": 1}
    assert a.by_rule == {"numpy-kernel": 3, "numpy-wrappers": 2, "loop-driver": 1}
    # Top lines are the innermost Python frame's line: the wrapper's, then the step's.
    assert [(k[2], k[1], n) for k, n, _ in a.top_lines] == [
        ("_wrapreduction", 83, 5),
        ("build.<locals>.step", 56, 1),
    ]
    assert a.top_lines[0][2] == {"compute": 3, "dispatch": 2}
    # Top stacks start inside the step driver.
    assert a.top_stacks[0][0:3] == (3, "compute", "numpy-kernel")
    assert a.top_stacks[0][3][0] == LOOP
    counts = sampling.category_counts(samples)
    assert counts["compute"] == 3 and counts["feed_fetch"] == 0


def test_analysis_without_a_step_driver_uses_every_main_thread_sample() -> None:
    script = Frame("<module>", "/home/me/train.py", 12)
    a = sampling.analyse((Sample((script,), 7, "main"),))
    assert (a.total, a.scoped, a.by_label) == (7, False, {"python": 7})


# --- attaching, and failing to -----------------------------------------------------------


def test_a_step_asleep_is_other_and_a_wait_on_a_loaders_queue_is_data_in() -> None:
    # The frames py-spy (--idle --native) gave a numpy loop sleeping at its line 17 and one
    # waiting for a loader thread's batch at its line 34.
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    libpy = "/usr/lib/libpython3.11.so.1.0"
    script = "/home/me/train.py"
    asleep = (
        SEGMENT,
        LOOP,
        Frame("<module>", script, 17),
        Frame("time_sleep", libpy, native=True),
        Frame("clock_nanosleep", libc, native=True),
    )
    queued = (
        SEGMENT,
        LOOP,
        Frame("<module>", script, 34),
        Frame("Queue.get", "/usr/lib/python3.11/queue.py", 171),
        Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
        Frame("0x7f2cd7a9f220", libc, native=True),
    )
    work = (
        SEGMENT,
        LOOP,
        Frame("<module>", script, 20),
        Frame("DOUBLE_add", NUMPY_SO, native=True),
    )
    assert rules.match(asleep) == rules.Match("other", rules.SLEEP, 4)
    assert rules.match(queued).label == "feed_fetch"
    assert rules.match(queued).rule == rules.QUEUE_WAIT
    a = sampling.analyse(
        (Sample(asleep, 6, "main"), Sample(queued, 3, "main"), Sample(work, 1, "main"))
    )
    assert a.by_label["other"] == 6 and a.by_label["feed_fetch"] == 3
    assert a.asleep == [((script, 17, "<module>"), 6)]
    # The line that waits is the script's, outside queue.py and threading.py.
    assert a.queued == [((script, 34, "<module>"), 3)]


def test_the_scripts_function_making_batches_is_named_not_the_toolkits_loop_mark() -> None:
    # A Keras generator's loop over its samples runs the automatic loop marks: "The batches
    # come from Python (DataGenerator.__data_generation, LoopMarks.mark (detect.py))".
    import profiler.capture.script.detect as detect

    entry = Frame(
        sampling.PY_FUNC_ENTRY[1], "/venv/site-packages/" + sampling.PY_FUNC_ENTRY[0], 260
    )
    gen = Frame("DataGenerator.__data_generation", "/home/me/train.py", 92)
    mark = Frame("LoopMarks.mark", detect.__file__, 860)
    a = sampling.analyse(
        (
            Sample((entry, gen), 3, "tf_data 12"),
            Sample((entry, gen, mark), 2, "tf_data 12"),
        )
    )
    assert a.input_python == 5
    assert a.input_functions == {"DataGenerator.__data_generation (train.py)": 5}


def test_attach_to_an_exited_process_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(PhaseUnavailable) as info:
        sampled_mod.start(child.pid, tmp_path / "out.json", tmp_path / "log.txt", timeout_s=20)
    assert f"process {child.pid} is not running" in str(info.value)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop py-spy to another user")
def test_ptrace_forbidden_is_unavailable_with_the_fix(tmp_path: Path) -> None:
    # py-spy run as 'nobody' may not ptrace a root process: the kernel's EPERM, for real.
    exe = sampled_mod.find_pyspy()
    assert exe is not None
    wrapper = tmp_path / "py-spy-as-nobody"
    wrapper.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {exe} "$@"\n'
    )
    wrapper.chmod(0o755)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        with pytest.raises(PhaseUnavailable) as info:
            sampled_mod.start(
                target.pid, tmp_path / "o.json", tmp_path / "log.txt", exe=str(wrapper)
            )
    finally:
        target.kill()
        target.wait()
    msg = str(info.value)
    assert "ptrace is not permitted" in msg
    assert "CAP_SYS_PTRACE" in msg and "ptrace_scope=0" in msg


def test_unavailable_reasons_name_the_cause_and_the_fix() -> None:
    denied = "Permission Denied: Try running again with elevated permissions by going 'sudo'"
    assert "ptrace is not permitted" in sampled_mod.unavailable_reason(denied, os.getpid(), 1)
    gone = "Error: Failed to get process executable name. Check that the process is running."
    assert "is not running" in sampled_mod.unavailable_reason(gone, os.getpid(), 1)
    other = sampled_mod.unavailable_reason("Error: unsupported python version 9.9", os.getpid(), 1)
    assert "exited with status 1" in other and "unsupported python version" in other


def test_missing_pyspy_leaves_the_rest_of_the_run_intact(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sampled_mod, "find_pyspy", lambda: None)
    phases = [
        TimedPhase(Budget(1, 1, 10**6)),
        SampledPhase(Budget(1, 10, 10)),
        LinesPhase(Budget(1, 10, 10)),
    ]
    trace = run_workload(
        fw.QUICK, Params(steps=50, n=8), phases, workload_dir=tmp_path, tensorboard_dir=tmp_path
    )
    assert trace.status == "ok"
    assert [(p.name, p.status) for p in trace.phases] == [
        ("timed", "ok"),
        ("sampled", "unavailable"),
        ("lines", "ok"),
    ]
    assert "pip install py-spy" in trace.phase("sampled").reason
    out = summary.workload_summary(analyse_workload(_outcome(trace)))["sampling"]
    assert out is not None and out["status"] == "unavailable" and out["samples"] is None


# --- real runs ---------------------------------------------------------------------------


def _validate_workload_entry(entry: dict) -> None:
    schema = summary.schema()
    jsonschema.validate(entry, {"$ref": "#/$defs/workload", "$defs": schema["$defs"]})


@pytest.fixture(scope="module")
def numpy_run():
    return tracing_runs.numpy_outcome()


def test_numpy_gd_sampled_run_finds_compute_between_10_and_50_percent(numpy_run) -> None:
    outcome, wdir = numpy_run
    assert outcome.status == "ok", outcome.error
    rec = outcome.trace.phase("sampled")
    assert rec.status == "ok", rec.reason
    assert rec.data.native is True and rec.data.idle is True
    assert rec.data.rate_hz == tracing_runs.NUMPY_RATE_HZ
    entry = summary.workload_summary(analyse_workload(outcome))
    _validate_workload_entry(entry)
    s = entry["sampling"]
    # ~4,500 samples in steps on a quiet machine; 472 beside another test's process, 262 beside
    # two (py-spy's native unwinding falls behind its rate): enough for the shares below.
    assert s["samples"]["in_steps"] >= 150
    share = s["by_category"]["compute"]["share"]
    # Native samples find the ufunc kernels: 19-22% of the step in earlier runs, 9.7% on a
    # loaded machine (py-spy's native unwinding then pauses the process for longer).
    assert 0.05 <= share <= 0.50, s["by_category"]
    # numpy has no feed, no session and no tracing; dispatch is the largest part.
    assert s["by_category"]["feed_fetch"]["samples"] == 0
    assert s["by_category"]["dispatch"]["share"] > share
    assert s["rules"]["numpy-kernel"] > 0 and s["rules"]["numpy-wrappers"] > 0
    phase = next(p for p in entry["phases"] if p["name"] == "sampled")
    assert phase["inflation"] is not None and s["inflation_mean"] is not None


def test_numpy_gd_artefacts_come_from_one_capture(numpy_run) -> None:
    outcome, wdir = numpy_run
    rec = outcome.trace.phase("sampled")
    # The phase records py-spy's one capture; the other views are rendered from its samples.
    assert set(rec.artefacts) == {"pyspy.speedscope.json", "pyspy.log"}
    written, problems = artefacts.write_all(wdir.parent.parent, [analyse_workload(outcome)])
    assert not problems
    assert set(written[outcome.slug]["sampled"]) == {"pyspy.collapsed.txt", "flamegraph.svg"}
    pid = rec.data.pid
    assert pyspy.read_speedscope(wdir / "pyspy.speedscope.json", pid) == rec.samples
    assert pyspy.parse_collapsed((wdir / "pyspy.collapsed.txt").read_text()) == rec.samples
    svg = ET.parse(wdir / "flamegraph.svg").getroot()
    assert svg.tag.endswith("svg") and len(svg.findall("{http://www.w3.org/2000/svg}g")) > 10


@pytest.fixture(scope="module")
def tf1_run():
    return tracing_runs.tf1_trace()


@pytest.mark.tf
def test_tf1_gd_samples_sit_in_the_session_call_with_feed_fetch_found(tf1_run) -> None:
    trace, _ = tf1_run
    rec = trace.phase("sampled")
    assert rec.status == "ok", rec.reason
    assert rec.data.idle is True and rec.data.native is False
    a = sampling.analyse(rec.samples)
    assert a.total >= 100
    in_run = sum(
        s.count
        for s in rec.samples
        if s.thread == "main"
        and rules.in_steps(s.frames)
        and any(f.function == "BaseSession.run" for f in s.frames)
    )
    # Nearly every sample is inside session.run; the native call is the largest part.
    assert in_run / a.total >= 0.9
    assert a.by_label.get("native_session", 0) / a.total >= 0.3
    # Found, at a share the machine's load moves: 10-20% quiet, 4.9% in a clean clone beside
    # other work (the native call, its kernels waiting for a core, grows).
    assert a.by_label.get("feed_fetch", 0) / a.total >= 0.03
    assert a.by_rule.get("tf1-fetch-handling", 0) > 0
    assert a.by_rule.get("tf1-feed-conversion", 0) > 0
    assert a.by_label.get("compute", 0) == 0  # kernels are not visible without --native


def test_the_training_updates_share_of_the_sampled_steps_and_whether_it_ran_eagerly() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    site = "/venv/lib/python3.11/site-packages/"
    grad = Frame("GradientTape.gradient", site + "tensorflow/python/eager/backprop.py", 1066)
    apply = Frame(
        "BaseOptimizer.apply_gradients", site + "keras/src/optimizers/base_optimizer.py", 383
    )
    call = Frame("Function.__call__", site + "tensorflow/python/eager/polymorphic_function/x.py")
    predict = Frame("TensorFlowTrainer.predict", site + "keras/src/backend/tensorflow/trainer.py")
    samples = (
        Sample((SEGMENT, LOOP, STEP, grad), 30, "main"),
        Sample((SEGMENT, LOOP, STEP, apply), 10, "main"),
        Sample((SEGMENT, LOOP, STEP, predict), 50, "main"),
        Sample((SEGMENT, LOOP, STEP), 10, "main"),
        Sample((grad,), 500, "tf_data"),  # another thread's: not the script's steps
    )
    got = sampling.update_share(samples)
    assert got is not None and (got.share, got.eager, got.samples) == (0.4, 1.0, 100)
    # The update inside a tf.function is not eager.
    traced = tuple(Sample((SEGMENT, LOOP, STEP, call, *s.frames[3:]), s.count, s.thread)
                   for s in samples)  # fmt: skip
    assert sampling.update_share(traced).eager == 0.0  # type: ignore[union-attr]
    # A DQN's update every 4 frames, no line timed: the periodic steps' fix is a cheaper
    # update, not "run it less often".
    trace = SimpleNamespace(phase=lambda name: SimpleNamespace(samples=samples))
    f: dict = {}
    performance._slow_update(f, trace, 4)
    assert f["slow_what"].startswith("The slow steps run the model's training update")
    assert "40% of the sampled steps' time, run eagerly" in f["slow_what"]
    assert f["slow_fix"].startswith("make it cheaper, not rarer: put the forward pass")
    assert "once every 4 steps" in f["slow_fix"]
    # A timed line names the slow steps (the DQN's target predict in the same steps): the
    # update gets a finding of its own, its cost its share of the timed window's mean step.
    from profiler.diagnoses.engine import evaluate

    timed = SimpleNamespace(window=SimpleNamespace(durations_ns=lambda: [10_000_000] * 4))
    both = SimpleNamespace(
        phase=lambda name: timed if name == "timed" else SimpleNamespace(samples=samples)
    )
    h: dict = {"label": "dqn.py", "slow_count": 18, "slow_excess_pct": 97.0}
    performance._slow_update(h, both, 4, named=True)
    assert "slow_what" not in h and h["update_apart"] and h["update_us"] == 4_000.0
    (d,) = evaluate([r for r in performance.RULES if r.id == "slow_steps_update"], "workload",
                    [{**h, "name": "dqn.py"}])  # fmt: skip
    assert d.fix.startswith("The slow steps run the model's training update") and d.cost_us == 4e3
    # No update among the samples: nothing said.
    g: dict = {}
    performance._slow_update(g, SimpleNamespace(phase=lambda name: SimpleNamespace(
        samples=samples[2:4])), 4)  # fmt: skip
    assert g == {}


def test_the_own_function_most_sampled_steps_ran_in_is_named_by_the_per_call_finding() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import loops

    # A numpy CNN from scratch: 67% of its steps in Conv3x3.backprop's loop over the regions.
    back = Frame("Conv3x3.backprop", "/home/u/cnn/conv.py", 60)
    fwd = Frame("Conv3x3.forward", "/home/u/cnn/conv.py", 40)
    train = Frame("train", "/home/u/cnn/cnn.py", 30)
    samples = (
        Sample((SEGMENT, LOOP, train, back, Frame("DOUBLE_add", NUMPY_SO, native=True)), 67,
               "main"),
        Sample((SEGMENT, LOOP, train, fwd), 20, "main"),
        Sample((SEGMENT, LOOP, train), 13, "main"),
    )  # fmt: skip
    assert sampling.own_functions(samples)[0] == ("Conv3x3.backprop (conv.py)", 0.67)
    auto = {"chosen_line": 30, "loops": [{"line": 30, "function": "train"}]}
    trace = SimpleNamespace(
        script={"auto_step": auto, "path": "/home/u/cnn/cnn.py"},
        phase=lambda name: SimpleNamespace(samples=samples),
    )
    f: dict = {}
    loops.where_facts(f, trace)
    assert f["numpy_where"] == (
        "; most of them run in Conv3x3.backprop (conv.py), 67% of the sampled steps' time"
    )
    # The step's own loop holding them: nothing more to say.
    auto["loops"][0]["function"] = "Conv3x3.backprop"
    g: dict = {}
    loops.where_facts(g, trace)
    assert g["numpy_where"] == ""


def test_the_eager_fix_saves_at_most_what_the_called_function_holds() -> None:
    # TF's basic training loops guide: its loop calls the eager train() and beside it reads
    # .numpy() values and prints; train() is ~80% of each epoch without the profiler, and the
    # whole step's Python and dispatch (96%) was offered as tf.function's saving.
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    script_file = "/home/u/basic_loop.py"
    loop = Frame("training_loop", script_file, 91)
    train = Frame("train", script_file, 60)
    eager = Frame("TFE_Py_Execute", "/venv/site-packages/tensorflow/python/eager/execute.py", 53)
    prints = Frame("report", script_file, 88)
    samples = (
        Sample((loop, train, eager), 60, "main"),
        Sample((loop, prints), 20, "main"),
        Sample((train,), 500, "tf_data"),  # another thread's: not counted
    )
    assert sampling.function_share(samples, "train") == (0.75, 80)
    # A method's frame, qualified by its class, is the function too.
    method = tuple(
        Sample(tuple(Frame("Trainer.train", script_file, 60) if f is train else f
                     for f in s.frames), s.count, s.thread)
        for s in samples
    )  # fmt: skip
    assert sampling.function_share(method, "train") == (0.75, 80)
    auto = {"chosen_line": 91, "calls": ["train"], "updates": False}
    trace = SimpleNamespace(
        script={"auto_step": auto}, phase=lambda name: SimpleNamespace(samples=samples)
    )
    f: dict = {"python_dispatch_us": 9_400.0, "step_us": 10_000.0, "eager": True}
    performance._eager_saving(f, trace)
    assert f["eager_saving_us"] == 7_500.0
    assert "train holds 75% of the step, from 80 samples" in f["eager_saving_how"]
    # The function holding more than the step's Python and dispatch: those are the bound.
    f = {"python_dispatch_us": 5_000.0, "step_us": 10_000.0, "eager": True}
    performance._eager_saving(f, trace)
    assert f["eager_saving_us"] == 5_000.0 and f["eager_saving_how"] == ""
    # The function not found in the samples (under a tenth): no bound.
    absent = SimpleNamespace(script={"auto_step": {**auto, "calls": ["other"]}},
                             phase=trace.phase)  # fmt: skip
    f = {"python_dispatch_us": 9_400.0, "step_us": 10_000.0, "eager": True}
    performance._eager_saving(f, absent)
    assert f["eager_saving_us"] == 9_400.0
    # Too few samples, or the loop's body itself the step: the step's Python and dispatch.
    few = SimpleNamespace(script={"auto_step": auto},
                          phase=lambda name: SimpleNamespace(samples=samples[:1][:0]))  # fmt: skip
    f = {"python_dispatch_us": 9_400.0, "step_us": 10_000.0, "eager": True}
    performance._eager_saving(f, few)
    assert f["eager_saving_us"] == 9_400.0
    body = SimpleNamespace(script={"auto_step": {**auto, "updates": True}}, phase=trace.phase)
    f = {"python_dispatch_us": 9_400.0, "step_us": 10_000.0, "eager": True}
    performance._eager_saving(f, body)
    assert f["eager_saving_us"] == 9_400.0


def test_a_function_the_loop_calls_that_runs_tensorflow_eagerly_beside_tf_functions_is_named():
    # Keras's DDPG example: per environment step policy() calls the actor eagerly, then the
    # compiled update and target updates; policy holds ~45% of the step (the actor in a
    # tf.function: 9.9 -> 5.3 ms a step on a reduced copy, without the profiler).
    from types import SimpleNamespace

    from profiler.diagnoses import eager_calls

    script_file = "/home/u/ddpg.py"
    loop = Frame("<module>", script_file, 34)
    policy = Frame("policy", script_file, 28)
    layer = Frame("Layer.__call__", "/venv/site-packages/keras/src/layers/layer.py", 900)
    update = Frame("update", script_file, 14)
    fn = Frame("Function.__call__", "/venv/site-packages/tensorflow/python/eager/"
               "polymorphic_function/polymorphic_function.py", 800)  # fmt: skip
    samples = (
        Sample((loop, policy, layer), 45, "main"),
        Sample((loop, policy), 5, "main"),  # its numpy: not eager TensorFlow
        Sample((loop, fn, update, layer), 40, "main"),  # inside the tf.function: a graph
        Sample((loop,), 10, "main"),
    )
    assert sampling.eager_share(samples, ["policy", "update"]) == ("policy", 0.45, 100)
    auto = {"chosen_line": 34, "calls": ["policy", "update", "update_target"]}
    script = {"auto_step": auto, "functions": [{"name": "update"}, {"name": "update_target"}]}
    trace = SimpleNamespace(script=script, phase=lambda name: SimpleNamespace(samples=samples))
    f: dict = {"framework": "tf2", "mode": "function", "step_us": 12_000.0}
    eager_calls.eager_call_facts(f, trace)
    assert (f["eager_fn"], f["eager_fn_line"], f["eager_fn_pct"]) == ("policy", "34", 45.0)
    assert f["eager_fn_us"] == 0.45 * 12_000.0
    # A step with no tf.function (the eager finding's), or the switch that runs them all
    # eagerly, or a share under a fifth: nothing.
    for other in ({"mode": "eager"}, {"eager_switch": "tf.config.run_functions_eagerly(True)"}):
        g = {"framework": "tf2", "mode": "function", "step_us": 12_000.0, **other}
        eager_calls.eager_call_facts(g, trace)
        assert "eager_fn" not in g
    few = SimpleNamespace(script=script, phase=lambda name: SimpleNamespace(
        samples=(Sample(samples[0].frames, 10, "main"), *samples[1:])))  # fmt: skip
    g = {"framework": "tf2", "mode": "function", "step_us": 12_000.0}
    eager_calls.eager_call_facts(g, few)
    assert "eager_fn" not in g


def test_a_hot_line_running_tensorflow_eagerly_gets_the_tf_function_fix():
    # Keras's PPO example: `value_t = critic(observation)` at each environment step, beside the
    # tf.function sampling the action: 64% of the step, told "logging, metrics or an
    # evaluation every N steps"; in a tf.function the step ran 15.5 -> 2.6 ms.
    from types import SimpleNamespace

    from profiler.diagnoses import step_lines

    script_file = "/home/u/ppo.py"
    line = Frame("<module>", script_file, 285)
    layer = Frame("Layer.__call__", "/venv/site-packages/keras/src/layers/layer.py", 900)
    fn = Frame("Function.__call__", "/venv/site-packages/tensorflow/python/eager/"
               "polymorphic_function/polymorphic_function.py", 800)  # fmt: skip
    samples = (
        Sample((line, layer), 30, "main"),
        Sample((line,), 5, "main"),
        Sample((Frame("<module>", script_file, 281), fn, layer), 20, "main"),
    )
    assert sampling.eager_line_share(samples, script_file, [285]) == (30 / 35, 35)
    assert sampling.eager_line_share(samples, script_file, [281]) == (0.0, 20)
    assert sampling.eager_line_share(samples, script_file, [7]) is None
    trace = SimpleNamespace(phase=lambda name: SimpleNamespace(samples=samples))
    assert step_lines._eager(trace, script_file, [285])
    assert not step_lines._eager(trace, script_file, [281])

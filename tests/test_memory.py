"""Memory per step: the resident size sampled from a thread, its growth per step with its
interval, and the finding only where the process grows (issue 26, its first part).

Truths, measured without the profiler: the growing script keeps a 2,500-float64 array
(20,000 bytes of data plus its ~112-byte header) every step; the steady one keeps nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profiler.analysis import memory
from profiler.bench_noise import Busy
from reports import focus_view
from tests.test_script_run import cli, only_run, workload, write

GROWS = """
import numpy as np

kept = []
w = np.zeros(100)
# 10,000 steps: the loop watcher's first 0.25 s (~2,700 iterations on a quiet machine) are not
# steps yet, and the steps after them must hold enough memory samples.
for step in range(10_000):
    g = np.random.default_rng(step).normal(size=(20, 100)).mean(axis=0)  # ~0.2 ms a step
    w -= 0.01 * g
    kept.append(np.ones(2500))  # kept every step: a history of arrays
print(len(kept))
"""
STEADY = """
import numpy as np

w = np.zeros(100)
for step in range(3000):
    g = np.random.default_rng(step).normal(size=(20, 100)).mean(axis=0)
    w -= 0.01 * g
    last = np.ones(2500)  # replaced every step: nothing kept
print(float(w[0]))
"""


def _run(tmp_path: Path, body: str) -> tuple[dict, dict[str, dict]]:
    script = write(tmp_path, "loop.py", body)
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    run = only_run(tmp_path)
    doc = json.loads((run / "summary.json").read_text())
    return workload(run), {d["rule"]: d for d in doc["diagnoses"]}


def test_a_loop_keeping_an_array_each_step_grows_by_its_size(tmp_path: Path) -> None:
    w, found = _run(tmp_path, GROWS)
    m = w["memory"]
    assert m["grows"]
    # 20,000 bytes of data and the array's header, within 5%.
    assert 20_000 <= m["growth_bytes_per_step"] <= 21_000 * 1.05, m
    low, high = m["growth_interval"]
    assert low <= m["growth_bytes_per_step"] <= high
    assert m["peak_mb"] >= m["last_mb"] - 1
    assert "memory_growth" in found
    # The message quotes the same growth in KB (20,000 bytes read 19.5 KB; 20,480 and more,
    # the array's header and the list's slot with it, read 20.0 KB once under load).
    said = re.search(r"grows by ([\d.]+) KB every step", found["memory_growth"]["message"])
    assert said is not None, found["memory_growth"]["message"]
    assert float(said.group(1)) == pytest.approx(m["growth_bytes_per_step"] / 1024, abs=0.06)


@pytest.mark.parametrize("busy", [False, True])
def test_a_steady_loop_gets_no_growth_finding_even_beside_a_busy_process(
    tmp_path: Path, busy: bool
) -> None:
    if busy:
        with Busy():
            w, found = _run(tmp_path, STEADY)
    else:
        w, found = _run(tmp_path, STEADY)
    assert "memory_growth" not in found, found.get("memory_growth")
    # A few hundred bytes a step at most: the allocator's noise (102.8 once, beside the busy
    # process, two pytest workers and two other profiles on 2 cores).
    assert not w["memory"]["grows"] or abs(w["memory"]["growth_bytes_per_step"]) < 256


def test_growth_is_measured_after_the_warm_up_with_its_interval() -> None:
    steps = list(range(0, 1000, 5))
    rss = [50_000_000 + (0 if s < 100 else 4096 * (s - 100)) for s in steps]
    m = memory.analyse(
        {
            "measured": True,
            "rss_bytes": rss,
            "steps": steps,
            "peak_bytes": rss[-1],
            "peak_step": 995,
        }
    )
    assert m is not None and m.grows and m.growth_per_step == pytest.approx(4096)
    flat = memory.analyse(
        {"measured": True, "rss_bytes": [50_000_000] * len(steps), "steps": steps}
    )
    assert flat is not None and not flat.grows
    assert memory.analyse({"measured": False, "why": "no /proc"}) is None
    # The profiler's own record of each step's end (9 bytes a step) is not the script's: a
    # per-sample loop of 8 million steps read "grows by 8 bytes every step ... 54.7 MB".
    own = {"recorder_bytes_per_step": 9.0, "recorder_steps_max": 10_000_000}
    recorded = [50_000_000 + 9 * s for s in steps]
    base = {"measured": True, "rss_bytes": recorded, "steps": steps, **own}
    kept = memory.analyse(base)
    assert kept is not None and not kept.grows and kept.growth_per_step == pytest.approx(0)
    assert kept.recorder_bytes == 9 * steps[-1]
    assert memory.to_json(kept)["recorder_mb"] == round(9 * steps[-1] / 2**20, 2)
    past = memory.analyse({**base, "recorder_steps_max": 500})  # it stopped recording
    assert past is not None and past.growth_per_step == pytest.approx(9)


def test_a_buffer_made_anew_each_epoch_is_jumps_up_and_down_not_growth() -> None:
    """d2l's softmax regression refills a shuffle buffer of the whole data set each epoch: the
    resident size jumps by ~175 MB up and down at epoch ends, flat between them, and no growth
    without the profiler; profiled, "grows by 135.2 KB a step ... 277.9 MB". Jumps up and
    down are told apart; jumps all up (a leak that grows in steps) stay its growth."""
    mb = 2**20
    steps = list(range(0, 2400, 10))
    # Epochs of 240 steps: +175 MB at epochs 4, 5, 8 and 9, -200 MB at 6, a little noise.
    level = {4: 175, 5: 350, 6: 150, 7: 150, 8: 325, 9: 500}
    rss = [1000 * mb + level.get(s // 240, 0) * mb + (s % 7) * 4096 for s in steps]
    m = memory.analyse({"measured": True, "rss_bytes": rss, "steps": steps})
    assert m is not None and not m.grows, (m.growth_per_step, m.growth_low)
    assert [round(b / mb) for _, b in m.jumps] == [175, 175, -200, 175, 175], m.jumps
    said = focus_view.growth_text(memory.to_json(m) or {})
    assert said.startswith("no growth per step measured between its 5 jumps (95%: "), said
    assert "up and down, by up to 200 MB at once" in said
    # All up: a leak in steps, its growth as before.
    up = [1000 * mb + 60 * mb * (s // 240) + (s % 7) * 4096 for s in steps]
    m = memory.analyse({"measured": True, "rss_bytes": up, "steps": steps})
    assert m is not None and m.grows and not m.jumps


def test_after_a_phase_frees_its_buffers_the_growth_counts_only_past_the_old_peak() -> None:
    # 4 KB a step; steps 300-600 a phase holds 20 MB more and frees it at its end: the script
    # grows into the freed heap (resident bytes flat) until step ~5,400, then rises again.
    steps = list(range(0, 8000, 10))
    grown = [50_000_000 + 4096 * s for s in steps]
    peak = 50_000_000 + 4096 * 600 + 20_000_000
    rss = [
        g + 20_000_000 if 300 <= s <= 600 else max(g, peak) if s > 600 else g
        for s, g in zip(steps, grown, strict=True)
    ]
    record = {"measured": True, "rss_bytes": rss, "steps": steps}
    clean = [(0, 300), (601, 1 << 62)]
    m = memory.analyse(record, clean=clean)
    assert m is not None and m.grows and m.growth_per_step == pytest.approx(4096, rel=0.05), m
    # Read from the flat stretch as well, the growth would be well under the truth.
    naive = memory._clean_segments(
        [(s, r) for s, r in zip(steps, rss, strict=True) if s >= 800], clean
    )
    fit = memory.within_theil_sen(naive)
    assert fit is not None and fit[0] < 0.8 * 4096
    # A stretch that never passes the peak says nothing of growth: left out.
    assert memory._tail_past_peak(clean, steps[:400], rss[:400]) == [(0, 300)]


def test_growth_measured_only_early_is_not_confirmed_late() -> None:
    # Clean steps only in the first third: the rise may be an allocator filling up (a DCGAN's
    # process rose 119 KB a step over 170 steps, 31 KB over the next 510, without the profiler).
    steps = list(range(0, 1000, 5))
    rss = [50_000_000 + 4096 * s for s in steps]
    record = {"measured": True, "rss_bytes": rss, "steps": steps}
    early = memory.analyse(record, clean=[(0, 300)])
    assert early is not None and early.grows and not early.late
    both = memory.analyse(record, clean=[(0, 300), (700, 1 << 62)])
    assert both is not None and both.grows and both.late


# --- what grows, named (issue 26, item 2) -------------------------------------------------------


def _candidate(kind: str, label: str, per_step: float, **kw: object) -> dict:
    steps = list(range(0, 1000, 50))
    return {
        "kind": kind,
        "label": label,
        "steps": steps,
        "values": [int(per_step * s) for s in steps],
        **kw,
    }


def _record(growth: int, *grew: dict, predict_calls: int = 0) -> tuple[dict, dict]:
    steps = list(range(0, 1000, 5))
    rss = [500_000_000 + growth * s for s in steps]
    mem = {
        "measured": True,
        "rss_bytes": rss,
        "steps": steps,
        "causes": {
            "every_s": 0.5,
            "probes": 20,
            "errors": 0,
            "probe_cost_ns": 50_000,
            "grew": list(grew),
        },
    }
    script = {"steps": 995, "keras_calls": {"predict": {"calls": predict_calls}}}
    return mem, script


def test_a_container_holding_the_growth_is_named_with_its_share() -> None:
    mem, script = _record(
        4_200,
        _candidate("graph", "the default graph", 0.0),
        _candidate(
            "container", "history", 1.0, item="a tf.Tensor float32 (1024, 1)", item_bytes=4_200
        ),
        _candidate("container", "log", 0.5, item="a float", item_bytes=24),
    )
    m = memory.analyse(mem, script)
    assert m is not None and m.growth_per_step == pytest.approx(4_200)
    assert m.projected_bytes == pytest.approx(500_000_000 + 4_200 * 995, rel=1e-3)
    first = m.causes[0]
    assert (first.kind, first.label) == ("container", "history")
    assert first.share == pytest.approx(1.0, abs=0.02)
    assert [c.label for c in m.causes] == ["history", "log"]  # the flat graph is not a cause


def test_graph_ops_come_before_retraces_and_predict_calls_and_a_one_off_rise_is_no_cause() -> None:
    one_off = _candidate("function", "setup", 0.0)
    one_off["values"] = [0] * 5 + [3] * (len(one_off["steps"]) - 5)
    mem, script = _record(
        60_000,
        _candidate("function", "train_step", 1.0),
        _candidate(
            "graph",
            "the default graph",
            3.0,
            ops=[{"type": "Assign", "line": 21, "text": "sess.run(w.assign(v))", "seen": 8}],
        ),
        one_off,
        predict_calls=995,
    )
    m = memory.analyse(mem, script)
    assert m is not None
    assert [c.kind for c in m.causes] == ["graph", "function", "predict"]
    g = m.causes[0]
    assert g.per_step == pytest.approx(3.0, rel=0.02) and g.line == 21 and g.detail == "Assign"


def test_the_finding_quotes_the_cause_and_only_its_fix() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import memory as rules
    from profiler.diagnoses.engine import evaluate

    def found(mem: dict, script: dict) -> list:
        f: dict = {"name": "s", "label": "s"}
        rules.memory_facts(f, SimpleNamespace(script={**script, "memory": mem}))
        return evaluate(rules.RULES, "workload", [f])

    mem, script = _record(
        60_000,
        _candidate(
            "graph",
            "the default graph",
            3.0,
            ops=[{"type": "Assign", "line": 21, "text": "sess.run(w.assign(v))", "seen": 8}],
        ),
    )
    (d,) = found(mem, script)
    assert "58.6 KB every step" in d.message
    assert "the default graph grows by 3.0 ops a step" in d.message
    assert "line 21" in d.message and "projected at the run's last step" in d.message
    assert "placeholder" in d.fix and "float(" not in d.fix
    mem, script = _record(60_000)
    (d,) = found(mem, script)
    assert "no graph, tf.function, container or array" in d.message and d.fix == ""
    # model.compile in a loop (a learning rate changed by recompiling: ~170 KB a step without
    # the profiler, flat compiled once): its new optimizers and train functions.
    compiled = {**script, "keras_calls": {"compile": {"calls": 25, "ms": 9e3}}}
    (d,) = found(mem, compiled)
    assert "model.compile ran 25 times" in d.message and d.fix.startswith("Compile once")
    # Each compile a model of its own, fit one after another (TF's time series tutorial: 4
    # models fit, a baseline compiled to evaluate): no compile to take out of a loop.
    models = {**script, "keras_calls": {"compile": {"calls": 5, "ms": 19.0}}, "fit": {"models": 4}}
    (d,) = found(mem, models)
    assert "model.compile ran 5 times, for 4 models fit trained" in d.message
    assert d.fix.startswith("Each model is compiled once") and "Compile once" not in d.fix
    mem, script = _record(0, _candidate("container", "kept", 1.0, item="a float", item_bytes=24))
    assert found(mem, script) == []
    # A list of floats holding 0.04% of a 58.6 KB-a-step growth is not its cause: named with
    # its share, given no fix (the growth, measured late too, is still reported).
    mem, script = _record(
        60_000, _candidate("container", "kept", 1.0, item="a float", item_bytes=24)
    )
    (d,) = found(mem, script)
    assert "0% of the growth" in d.message and "no name of the script's" in d.message
    assert d.fix == ""


def test_the_probe_follows_the_scripts_names_and_what_their_items_hold(monkeypatch) -> None:
    import sys
    import types

    import numpy as np

    from profiler.capture.memory_causes import CauseProbe
    from profiler.model.memory import Causes

    mod = types.ModuleType("__main__")
    mod.__file__ = "/nowhere/script.py"
    kept: list = []
    mod.kept, mod.steady = kept, [1, 2]
    mod.trainer = types.SimpleNamespace(history={})
    monkeypatch.setitem(sys.modules, "__main__", mod)
    probe = CauseProbe()
    for step in range(0, 100, 10):
        for i in range(10):
            kept.append(np.ones(2500))
            mod.trainer.history[step + i] = float(i)
        mod.fresh = [0] * step  # a new list each time: restarted, never a growth
        # An array made anew a row larger each step (np.vstack of itself): followed by its name.
        mod.history = np.zeros((step + 1, 100))
        mod.weights = np.zeros((64, 100))  # made anew, the same size: no growth
        probe.probe(step)
    rec = Causes.from_json(probe.record())
    assert rec is not None and rec.errors == 0 and rec.probes == 10
    by = {c.label: c for c in rec.grew}
    assert set(by) == {"kept", "trainer.history", "history"}
    assert by["kept"].values[-1] == 100 and by["kept"].item_bytes >= 20_000
    assert by["trainer.history"].item == "a float"
    assert by["history"].kind == "array" and by["history"].values[-1] == 91 * 800
    assert by["history"].item == "a numpy float64 array (91, 100)"


@pytest.mark.tf
def test_the_probe_reads_graph_ops_with_their_line_and_a_functions_traces(monkeypatch) -> None:
    import sys
    import types

    import tensorflow as tf

    from profiler.capture.memory_causes import CauseProbe
    from profiler.model.memory import Causes

    mod = types.ModuleType("__main__")
    mod.__file__ = __file__
    monkeypatch.setitem(sys.modules, "__main__", mod)
    graph = tf.Graph()
    with graph.as_default():
        v = tf.compat.v1.Variable(0.0)
        mod.sess = tf.compat.v1.Session(graph=graph)
        probe = CauseProbe()
        for step in range(30):
            tf.compat.v1.assign(v, float(step))  # three new ops a step, from this line
            if step % 5 == 0:
                probe.probe(step)

    @tf.function
    def double(x: float) -> tf.Tensor:
        return x * 2

    mod.double = double
    for step in range(30, 60):
        double(float(step))  # a Python float: a new trace each step
        if step % 5 == 0:
            probe.probe(step)
    rec = Causes.from_json(probe.record())
    assert rec is not None and rec.errors == 0
    by = {c.kind: c for c in rec.grew}
    g = by["graph"]
    assert g.values[5] - g.values[0] == 3 * 25
    assert {o.type for o in g.ops} >= {"AssignVariableOp"}
    assert all("tf.compat.v1.assign(v, float(step))" in o.text for o in g.ops)
    f = by["function"]
    assert f.label == "double" and f.values[-1] - f.values[0] == 25


def test_an_array_made_anew_larger_each_step_is_named_as_the_growth_with_its_fix() -> None:
    from profiler.analysis import memory
    from profiler.diagnoses.memory import _cause_text
    from profiler.model.memory import Candidate, Causes

    # A logistic regression's weight history, np.vstack of itself every step: 800 bytes a step.
    steps = tuple(range(100, 1000, 100))
    grew = (
        Candidate("array", "w_history", steps, tuple(800 * s for s in steps), "a numpy array"),
        Candidate("array", "w", steps, (800,) * len(steps), "a numpy float64 array (100,)"),
    )
    causes = Causes(every_s=0.5, probes=9, errors=0, probe_cost_ns=1000, grew=grew)
    (cause,) = memory.explain(causes, {}, 100, 1_480.0)
    assert cause.kind == "array" and cause.bytes_per_step == 800.0
    assert round(100 * (cause.share or 0)) == 54
    what, fix = _cause_text(cause)
    assert what.startswith("`w_history` grows by 800 bytes a step, 54% of the growth, now a numpy")
    assert "make `w_history` once after the loop (np.array(rows))" in fix


def test_a_slow_memory_probe_is_kept_and_taken_off_the_long_step_it_fell_in() -> None:
    from profiler.capture.memory import RssSampler
    from profiler.capture.script.driver import long_steps

    # Beside a busy process a probe holding the interpreter's lock stalled the steps it fell in
    # (~100 ms, every 330 steps of a numpy loop: its 0.5 s period), read as work the loop does
    # once in a while; a quick probe inside a long evaluation step is no reason to leave it out.
    now = [0]
    sampler = RssSampler(lambda: now[0], lambda: 0)
    now[0] = 1_000_000
    sampler._slow_probe(0)
    now[0] = 110_000_000
    sampler._slow_probe(10_500_000)
    assert sampler.probe_ns == [10_500_000, 110_000_000]
    import array

    ms = 1_000_000
    ends = array.array("q", [(i + 1) * ms for i in range(100)])
    for i in range(10, 100):
        ends[i] += 100 * ms  # step 10 stalled 100 ms by the probe
    # The probe's time is taken off the step it fell in: what is left is a step like the others.
    out = long_steps(0, ends, 0, [], [], {}, probes=sampler.probe_ns)
    assert out["steps"] == [] and out["left_out"] == 0
    assert long_steps(0, ends, 0, [], [], {})["steps"][0]["step"] == 10
    # A 5 ms probe inside a 1 s step (a shuffle buffer refilling at an epoch's start) leaves
    # the step long: it was left out, and no answer named the epochs' starts.
    ends = array.array("q", [(i + 1) * ms for i in range(100)])
    for i in range(30, 100):
        ends[i] += 1000 * ms
    out = long_steps(0, ends, 0, [], [], {}, probes=[300 * ms, 305 * ms])
    assert [(r["step"], r["us"]) for r in out["steps"]] == [(30, 996_000.0)], out


def test_the_probe_thread_reads_no_locals_while_the_main_thread_runs_the_profilers_code():
    # A probe reading the main thread's frames' locals while it serialised a partial trace
    # died of a segmentation fault (CPython 3.11): from another thread, only the globals then.
    import threading

    from profiler.capture import memory_causes

    def script_function() -> list[str]:
        held_here = [1, 2, 3]  # noqa: F841 - a local the probe would name
        got: list[str] = []
        t = threading.Thread(
            target=lambda: got.extend(n for n, _ in memory_causes.script_roots(__file__))
        )
        t.start()
        t.join()
        return got

    # Called from this test (the main thread's top frame is threading's join, not the
    # profiler's): the local is read.
    assert "script_function().held_here" in script_function()
    # The main thread waiting in code counted as the profiler's: only the globals.
    own = memory_causes._OWN
    memory_causes._OWN = str(Path(threading.__file__).parent)
    try:
        assert not any("()." in n for n in script_function())
    finally:
        memory_causes._OWN = own
    # From the main thread itself, its own frames' locals are read whatever runs.
    assert "script_function2().mine" in _own_thread()


def _own_thread() -> list[str]:
    from profiler.capture import memory_causes

    def script_function2() -> list[str]:
        mine = 1  # noqa: F841
        return [n for n, _ in memory_causes.script_roots(__file__)]

    return script_function2()


def test_the_memory_the_phases_added_and_kept_is_said_apart_from_the_scripts():
    """A script calling fit 80 times in a loop: 547 -> 695 MB under the profiler, 544 -> 551
    MB without it (the what-ifs' compiled variants and the tracer kept theirs), unsaid."""
    from profiler.analysis import memory
    from reports import focus_view

    mb = 2**20
    steps = [0, 100, 200, 300, 400, 500, 600]
    rss = [547 * mb, 548 * mb, 600 * mb, 601 * mb, 690 * mb, 694 * mb, 695 * mb]
    spans = [("framework", 150, 250), ("whatif", 350, 450)]
    assert memory._phases_added(steps, rss, spans) == (601 - 548 + 694 - 601) * mb
    assert memory._phases_added(steps, rss, []) is None
    # A span to the run's end: what it held at the end.
    assert memory._phases_added(steps, rss, [("whatif", 350, 900)]) == (695 - 601) * mb
    # Less the script's own growth over the span's steps (a callback keeping every batch's
    # weights, 408 KB a step: 1,551 MB of it read as the phases').
    grows = [100 * mb + s * 400_000 for s in steps]
    assert memory._phases_added(steps, grows, spans, 400_000.0) == 0
    assert memory._phases_added(steps, rss, spans, 100_000.0) == (
        (601 - 548 + 694 - 601) * mb - 2 * 200 * 100_000
    )
    m = {"first_mb": 547.0, "last_mb": 695.0, "peak_mb": 719.0, "peak_step": 400,
         "peak_phase": "", "phases_added_mb": 146.0, "growth_bytes_per_step": None,
         "growth_interval": None, "grows": False, "steps": 500, "causes": []}  # fmt: skip
    w = {"memory": m}
    line = focus_view.memory_line(w)
    assert (
        "695 MB at the last, 146 MB of the rise kept from while the profiler's phases ran" in line
    )
    small = {"memory": {**w["memory"], "phases_added_mb": 10.0}}
    assert "profiler's phases" not in focus_view.memory_line(small)
    # A long run's record of every step's end is said too (8 million steps: 68 MB).
    long = {"memory": {**m, "first_mb": 95.0, "last_mb": 259.0, "phases_added_mb": None,
                       "recorder_mb": 68.4}}  # fmt: skip
    assert "259 MB at the last, 68 MB of it the profiler's record of every step's end" in (
        focus_view.memory_line(long)
    )

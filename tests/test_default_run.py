"""No options, a complete answer: short scripts are run again for the phases they missed.

The three scripts of ``tests/data/short`` are a new user's first tries, profiled as they would
be, with no options: a numpy gradient-descent loop (20,000 steps, ~1 s alone), a TF1 logistic
regression from a course (~3.5 s alone on a quiet machine) and a TF2 ``tf.function`` loop
(~13 s alone). Each ends before every phase got its window in one run; the profiler runs it
again by itself within its budget and merges what each run measured.

Their truths, measured without the profiler (``make bench --scripts`` prints them again): the
numpy step barely grows with its data (256 rows: 8-16 µs a step; 2,560 rows: ~2.3x that for
10x the rows), so numpy's per-call cost, not its arithmetic, is most of it; the TF1 and TF2
steps run TensorFlow kernels, which the framework phase must measure.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from profiler.processes import rerun
from tests import recorded
from tests.test_script_run import DATA, cli, only_run, phase, workload

SHORT = DATA / "short"


def only_diagnoses(tmp_path: Path) -> list[dict]:
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    return list(doc["diagnoses"])


def _ok(w: dict) -> set[str]:
    return {p["name"] for p in w["phases"] if p["status"] == "ok"}


def _top(w: dict) -> str:
    typical = w["attribution"]["typical_us"]
    measured = {k: v for k, v in typical.items() if v is not None and k != "other"}
    return max(measured, key=measured.get)


def _check_missed(w: dict, may_miss: tuple[str, ...] = ()) -> None:
    s = w["script"]
    # A phase in ``may_miss`` may still be missing when the runs used up the budget (beside
    # the other test worker, the TF1 script's what-if got no steps in its 4th run of a 41 s
    # budget): the answer then names the run that would measure it and the budget.
    missed = [m for m in s["missed"] if m not in may_miss]
    assert missed == [], (s["message"], w["phases"])
    if s["missed"]:
        assert "--repeat 1 measures" in s["message"], s["message"]
        if len(s["runs"]) < rerun.MAX_RUNS:
            assert "budget" in s["message"], s["message"]
            assert s["rerun"]["spent_s"] > 0.5 * s["rerun"]["budget_s"], s["rerun"]
        else:
            assert f"at most {rerun.MAX_RUNS} times" in s["message"], s["message"]


def _check_merged(out, w: dict, may_miss: tuple[str, ...] = ()) -> None:
    _check_missed(w, may_miss)
    s = w["script"]
    assert s["rerun"]["mode"] == "auto" and len(s["runs"]) >= 2
    # Within the budget the first run set (the last run may be the one that crossed it by
    # less than a run's length: each run is expected to take as long as the one before).
    # A run for the sampled or framework phase may go past it (rerun.budget_for).
    allowed = rerun.budget_for(rerun.CORE, s["rerun"]["budget_s"], s["rerun"]["alone_s"])
    assert s["rerun"]["spent_s"] <= allowed + max(r["wall_s"] for r in s["runs"])
    # One line said it ran again and why; the final lines say what was merged; the
    # stale "got no steps" hint is gone.
    assert "again:" in out.stderr and "got no steps" in out.stderr
    answer = out.stdout.split("report:")[0]
    assert f"Measured over {len(s['runs'])} runs of the script" in answer
    if not s["missed"]:
        assert "got no steps" not in s["message"] and "--repeat" not in answer


def test_numpy_gd_with_no_options_measures_every_phase_and_names_numpy_overhead(
    tmp_path: Path,
) -> None:
    out = cli(tmp_path, str(SHORT / "numpy_gd.py"))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    assert _ok(w) == {"timed", "sampled", "lines"}, w["phases"]
    # Its steps hold 0.15-0.3 s: native samples at up to 300 Hz (the pauses stretch the
    # window) give ~200-270 a run on a quiet machine; a run with fewer than 50 (py-spy starved
    # of a core beside other processes: 8 at 100 Hz once) is run again and its samples added,
    # within the budget; still fewer at the end, the answer says so.
    sampled = phase(w, "sampled")
    n = sampled["data"]["samples_in_steps"]
    _check_merged(out, w, may_miss=("sampled",) if n < 50 else ())
    assert n >= 5, sampled["data"]
    assert sampled["data"]["share_interval_pts"] == round(196 * (0.25 / n) ** 0.5, 1)
    # Later runs take the loop the first one chose as their steps, from its first iteration.
    assert w["script"]["auto_step"]["chosen_line"] == 12
    assert w["attribution"]["not_measured"] == {}
    # The truth, measured without the profiler (the same loop at 256 rows against 1 row, 5
    # repeats): the arithmetic is 17-22% of a step, numpy's per-call cost and the interpreter
    # the rest. The sampled compute also holds the BLAS library's own entry cost of each matrix
    # product (it runs in the BLAS library), so it may read up to ~10 points above that (CI
    # once: 30.6% +-9.7 compute, 50.0% dispatch, 19.4% Python).
    share = w["attribution"]["share"]
    half = sampled["data"]["share_interval_pts"] / 100
    assert share["dispatch"] + half >= 0.4 and share["compute"] - half <= 0.32, share
    assert share["dispatch"] + share["python"] > 2 * share["compute"], share
    if n >= 50:
        # The overhead on top; how it splits between numpy's entry and the interpreter moves
        # with the samples (a clean-clone suite: Python 43%, dispatch 38%, compute 19%).
        assert _top(w) in ("dispatch", "python"), w["attribution"]
        rules = {d["rule"] for d in only_diagnoses(tmp_path)}
        assert "numpy_per_call" in rules, (rules, share)


@pytest.mark.tf
@pytest.mark.slow
def test_tf1_course_script_with_no_options_measures_its_kernels(tmp_path: Path) -> None:
    out = cli(tmp_path, str(SHORT / "tf1_logreg.py"), timeout=400)
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    # The kernels (framework) and the Python side (sampled or hooks) are what the answer needs.
    # On a fast quiet machine the first run's timed window wants ~600 of the script's 331
    # steps and each later run fits one phase: hooks, lines and the what-if may be left to
    # --repeat once the budget is spent, which the answer then says.
    assert {"timed", "framework"} <= _ok(w) and _ok(w) & {"sampled", "hooks"}, w["phases"]
    # Where the hooks measured the Python side, the sampled phase may have got too few samples
    # (py-spy starved of a core beside the other test worker: CI once), which the answer says.
    sampled_may_miss = ("sampled",) if "hooks" in _ok(w) else ()
    _check_merged(out, w, may_miss=("hooks", "lines", "whatif", *sampled_may_miss))
    att = w["attribution"]
    assert att["not_measured"] == {}
    # Kernels measured (not "Python 74%" for want of the framework phase).
    assert att["typical_us"]["compute"] > 0.1 * w["step_time"]["median_us"], att
    assert _top(w) != "python", att


@pytest.mark.tf
@pytest.mark.slow
def test_tf2_function_loop_with_no_options_measures_every_phase(tmp_path: Path) -> None:
    out = cli(tmp_path, str(SHORT / "tf2_function_loop.py"), timeout=500)
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    # Beside the other test worker the runs may spend the budget before lines' window got
    # its steps (CI: lines cut by the script's end in the last run the budget allowed): the
    # answer then names the budget and the --repeat that measures it (``_check_missed``).
    assert {"timed", "sampled", "framework", "hooks"} <= _ok(w), (w["phases"], w["script"])
    _check_missed(w, may_miss=("lines", "whatif"))
    att = w["attribution"]
    assert att["not_measured"] == {}
    # The step's kernels (two 256-wide layers on 128 rows, forward and backward) hold a large
    # share. Which of compute and Python leads is not stable across runs: compute led in two
    # clean-clone suites, Python (54%, 67%) in two others, the tf.function call's wait for its
    # kernels read as Python by the sampled phase; left open (issue 23), held here as compute
    # being measured as a large share (>= 20%), not as the top.
    assert att["share"]["compute"] >= 0.20, att  # 0.24 and 0.36 read in the runs Python led
    # The run's folder keeps the trace it was analysed from, its repeats merged in: analysed
    # again, it gives the same answer (what the recorded-run tests rely on).
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    again = recorded.summary_of_run(only_run(tmp_path))
    assert [(d["rule"], d["message"]) for d in again["diagnoses"]] == [
        (d["rule"], d["message"]) for d in doc["diagnoses"]
    ]
    assert again["workloads"][0]["attribution"] == w["attribution"]


# --- the budget, as pure functions -------------------------------------------------------------


def test_the_budget_is_3x_plus_20_s_under_30_s_and_1_5x_plus_15_s_from_there() -> None:
    assert rerun.budget_s(1.0) == 23.0
    assert rerun.budget_s(29.0) == 107.0
    # From 30 s: 1.5x + 15 s, never under what a script just under 30 s gets (no cliff).
    assert rerun.budget_s(30.0) == 110.0 and rerun.budget_s(35.0) == 110.0
    assert rerun.budget_s(100.0) == 165.0


def test_another_run_only_while_it_fits_the_budget_or_as_given() -> None:
    s = 10**9
    # 10 s spent and the next run expected to take 10 s more: 20 s fits a 23 s budget; 30 does not.
    assert rerun.another(None, 0, 10 * s, 10 * s, 23.0)
    assert not rerun.another(None, 1, 20 * s, 10 * s, 23.0)
    assert not rerun.another(None, rerun.MAX_RUNS - 1, 0, 0, 1e9)
    assert not rerun.another(None, 0, 0, 0, None)
    # --repeat N: N more runs, whatever the budget; --repeat 0: none.
    assert rerun.another(2, 1, 10**6 * s, s, 1.0) and not rerun.another(2, 2, 0, 0, 1e9)
    assert not rerun.another(0, 0, 0, 0, 1e9)
    # A run of the what-ifs alone runs no instrumented phase: an LSTM fit of 13.6 s alone took
    # 31.5 s with every phase and 21.2 s for its what-ifs; expected at 1.6x + 5 s (26.8 s), it
    # fits its 61 s budget, where the first run's 31.5 s did not.
    first = int(31.5 * s)
    assert rerun.expected_ns(["whatif"], first, 13.6) == int((1.6 * 13.6 + 5) * 1e9)
    assert rerun.another(None, 0, first, rerun.expected_ns(["whatif"], first, 13.6), 60.8)
    assert not rerun.another(None, 0, first, first, 60.8)
    assert rerun.expected_ns(["whatif", "lines"], first, 13.6) == first
    assert rerun.expected_ns(["whatif"], first, None) == first


def test_a_run_for_the_kernels_or_the_samples_may_go_past_the_budget_by_its_extra() -> None:
    # The 331-step TF1 course script beside other work: 21 s spent of a 33 s budget, a run
    # expected to take 12 s; the framework phase still missing gets it, the lines alone do not.
    s = 10**9
    for missing, runs in ((["framework", "lines"], True), (["lines", "whatif"], False)):
        allowed = rerun.budget_for(missing, 33.0)
        assert rerun.another(None, 1, 21 * s, 13 * s, allowed) is runs, (missing, allowed)
    assert rerun.budget_for(["sampled"], 33.0) == 33.0 + rerun.CORE_EXTRA_S
    assert rerun.budget_for(["sampled"], None) is None
    # TensorFlow's transfer-learning tutorial: 72.6 s alone, its first run 82 s, a second run
    # for its kernels expected as long: past 1.5x + 15 s + 20 s (144 s), within 3.5x + 20 s
    # (274 s); a script past CORE_LONGEST_S gets the 20 s only, and other phases nothing.
    base = rerun.budget_s(72.6)
    assert rerun.budget_for(["framework", "lines"], base, 72.6) == 3.5 * 72.6 + 20
    # TF's RNN text classifier beside other work: 59.4 s alone, 102.8 s its first run, a
    # second expected as long (2.5x + 20 s, 168.5 s, held it: "99% ... unexplained").
    assert rerun.another(
        None, 0, int(102.8 * s), int(102.8 * s), rerun.budget_for(["framework"], 110.0, 59.4)
    )
    assert rerun.another(None, 0, 82 * s, 82 * s, rerun.budget_for(["framework"], base, 72.6))
    assert not rerun.another(None, 0, 82 * s, 82 * s, rerun.budget_for(["lines"], base, 72.6))
    assert rerun.budget_for(["framework"], 200.0, 130.0) == 220.0
    line = rerun.again_line("t.py", ["framework"], 331, 2, 21 * s, 53.0)
    assert "of a 53 s budget, more than the other phases get" in line, line
    text = rerun.message("ran", ["framework"], [], 4.4, 12 * s, 33.2)
    assert "33 s: 3x the script's 4.4 s + 20 s, and 20 s more while the kernels" in text, text


def test_the_final_message_names_what_is_missing_and_the_repeat_that_measures_it() -> None:
    assert rerun.message("ran to its end", [], [], 5.0, 10**9, 35.0) == "ran to its end"
    text = rerun.message("ran", ["lines", "whatif"], [], 40.0, 70 * 10**9, 75.0)
    assert "lines and whatif got no steps" in text and "--repeat 1 measures them" in text
    assert (
        "about 70 s more, past this run's budget for all its runs, 75 s: 1.5x the script's "
        "40.0 s + 15 s" in text
    )
    thin = rerun.message("ran", ["sampled"], ["sampled"], None, 10**9, None)
    assert "sampled got too few samples to be right" in thin and "budget" not in thin
    both = rerun.message("ran", ["lines", "sampled"], ["lines", "sampled"], None, 10**9, None)
    assert "lines and sampled got too few steps or samples to be right" in both
    # A run of its own got the what-ifs no room either (word2vec's 60 steps, 3 a fit epoch):
    # no --repeat is offered, a longer run of the script is.
    stuck = rerun.message("ran", ["whatif"], [], 7.0, 7 * 10**9, 41.0, ["whatif"])
    assert stuck == (
        "ran; whatif got no steps, even in a run of the script measuring only it: the script's "
        "steps leave no room for it (a longer run of the script, more steps or epochs, would)"
    )


def test_the_again_line_tells_a_phase_with_no_steps_from_one_with_too_few_samples() -> None:
    line = rerun.again_line("t.py", ["lines", "sampled"], 20_000, 1, 3 * 10**9, 23.0, ["sampled"])
    assert line.startswith("profiling t.py again: lines got no steps in its 20,000 steps (it ")
    assert "ended first); sampled got too few samples to be right; this run fits them" in line
    assert "(run 2; 3 s so far of a 23 s budget, more than the other phases get while" in line
    alone = rerun.again_line("t.py", ["sampled"], 100, 2, 10**9, None, ["sampled"])
    assert "sampled got too few samples to be right; this run fits it" in alone
    assert "ended first" not in alone


def test_a_thin_sampled_phase_adds_another_runs_samples_until_it_has_enough() -> None:
    from profiler.capture.collectors.pyspy import MAIN_THREAD
    from profiler.capture.phases import sampled
    from profiler.model import OK, Frame, PhaseRecord, Sample
    from profiler.model.records import SampledData

    def rec(n: int, extra: int, reason: str = "") -> PhaseRecord:
        f = Frame("step", "t.py", 3)
        data = SampledData(100, True, "on", False, False, capture_s=0.5, samples=n + extra)
        samples = (Sample((f,), n, MAIN_THREAD), Sample((f,), extra, "Thread-1"))
        return PhaseRecord(
            "sampled",
            OK,
            samples=samples,
            data=data,
            reason=reason,
            artefacts=("s.json",),
            missed=True,
        )

    half = sampled.ENOUGH_SAMPLES // 2
    one = sampled.combine(rec(half - 1, 40), rec(half - 1, 40), "samples of repeat 1 added")
    # Other threads' samples do not count towards the main thread's.
    assert sampled.main_samples(one.samples) == 2 * half - 2 and one.missed
    assert one.data.samples == 2 * half - 2 + 80 and one.data.capture_s == 1.0
    assert one.artefacts == ("s.json", "s.json") and one.reason == "samples of repeat 1 added"
    two = sampled.combine(one, rec(2, 0), "samples of repeat 2 added")
    assert sampled.main_samples(two.samples) == 2 * half and not two.missed
    assert two.reason == "samples of repeat 1 added; samples of repeat 2 added"


def test_the_scripts_own_time_is_never_more_than_its_first_run_took() -> None:
    from types import SimpleNamespace

    from profiler.model import OK, PhaseRecord, Segment, Window

    # The text generation tutorial: 78 fit batches of ~0.48 s, then 300 one-character calls of
    # 0.9 ms, steps too; the timed window's mean times every step read 188 s where the script
    # ran 45 s (82 s profiled), and its budget let the runs take 228 s.
    bounds = tuple(485_000_000 * i for i in range(13))
    timed = PhaseRecord("timed", OK, window=Window("timed", (Segment(3, bounds),)))
    script = {"steps": 378, "time": {"before_s": 4.3, "after_s": 0.0}, "wall_s": 82.5}
    trace = SimpleNamespace(script=script, phases=(timed,))
    assert rerun.alone_s(trace) == 82.5  # type: ignore[arg-type]
    # Steps all alike: the estimate, below the instrumented run's time.
    even = SimpleNamespace(script={**script, "steps": 78}, phases=(timed,))
    assert rerun.alone_s(even) == pytest.approx(4.3 + 78 * 0.485)  # type: ignore[arg-type]


def test_a_later_run_takes_the_first_runs_loop_as_its_steps() -> None:
    class T:
        def __init__(self, script: dict) -> None:
            self.script = script

    auto = {"chosen_line": 12, "calls": [], "loops": [{"line": 12, "iterations": 900}]}
    got = rerun.same_steps(T({"steps": 100, "auto_step": auto, "marks": {}}))  # type: ignore[arg-type]
    assert got == {"step_line": 12, "expected_steps": 1000}
    # Explicit marks or framework calls as steps: only the count.
    marked = T({"steps": 100, "auto_step": auto, "marks": {"step_line": 3}})
    assert rerun.same_steps(marked) == {"expected_steps": 100}  # type: ignore[arg-type]
    assert rerun.same_steps(T({"steps": 7, "auto_step": None})) == {"expected_steps": 7}  # type: ignore[arg-type]


def test_a_loop_that_ended_before_it_was_chosen_is_the_steps_of_a_restart() -> None:
    class T:
        def __init__(self, script: dict) -> None:
            self.script = script

    loops = [{"line": 12, "iterations": 5000}, {"line": 3, "iterations": 8}]
    auto = {"chosen_line": None, "candidate_line": 12, "loops": loops}
    got = rerun.restart(T({"steps": 0, "auto_step": auto, "marks": {}}))  # type: ignore[arg-type]
    assert got == {"step_line": 12, "expected_steps": 5000}
    # Steps found, the user's own marks, or no loop worth taking: no restart.
    assert rerun.restart(T({"steps": 40, "auto_step": auto, "marks": {}})) == {}  # type: ignore[arg-type]
    marked = T({"steps": 0, "auto_step": auto, "marks": {"step_line": 3}})
    assert rerun.restart(marked) == {}  # type: ignore[arg-type]
    none = {"chosen_line": None, "candidate_line": None, "loops": loops}
    assert rerun.restart(T({"steps": 0, "auto_step": none, "marks": {}})) == {}  # type: ignore[arg-type]


def test_a_numpy_loop_too_short_to_be_chosen_is_run_again_with_it_as_the_steps(
    tmp_path: Path,
) -> None:
    # 3,000 steps of ~10-40 µs end before the loop watcher's 0.25 s: the first run finds no
    # steps (on a fast machine the 20,000-step script above did too).
    text = (SHORT / "numpy_gd.py").read_text().replace("20_000", "3_000")
    script = tmp_path / "tiny_gd.py"
    script.write_text(text)
    out = cli(tmp_path, str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    s = w["script"]
    if s["runs"][0]["steps"]:
        # Beside another test process its 3,000 steps outlasted the watcher once: the first
        # run then chose the loop itself (its steps counted from the choice on: 945 of them
        # once), and no restart was needed.
        assert 0 < s["runs"][0]["steps"] <= 3000 and s["auto_step"]["chosen_line"] == 12, s
        assert "before it was chosen" not in out.stderr
        return
    assert "its loop at line 12 ended (3,000 iterations) before it was chosen" in out.stderr
    assert s["runs"][0]["steps"] == 0 and s["runs"][1]["steps"] == 3000, s["runs"]
    assert s["auto_step"]["chosen_line"] == 12
    assert w["step_time"]["median_us"] < 1000, w["step_time"]
    assert "timed" in _ok(w) and all(p["repeat"] >= 1 for p in w["phases"] if p["status"] == "ok")


def test_a_loop_too_fast_to_be_the_steps_stops_being_timed(tmp_path: Path) -> None:
    # 300,000 iterations of ~0.05 µs (~0.8 µs watched, the watcher's mark included): under
    # DROP_ITERATION_NS, so after its first timed iterations its marks return at once (timing
    # every one of 3 million made a 0.8 s script take 8.5 s).
    from profiler.capture.script import detect

    script = tmp_path / "fast_inner.py"
    script.write_text(
        "import math\n"
        "def work():\n"
        "    s = 0\n"
        "    for i in range(300_000):\n"
        "        s += i\n"
        "    return s\n"
        "print(work())\n"
    )
    out = cli(tmp_path, str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    (loop,) = [x for x in w["script"]["auto_step"]["loops"] if x["line"] == 4]
    # Quiet, after its first EARLY_ITERATIONS timed ones. Beside other work its iterations
    # are watched at 1.5 µs and more for a while (before this stop's changes too: 168 and
    # 42,954 of them, 1 run in 6 beside a busy process), so most of them are short only later:
    # it must still stop being timed well before its end.
    if w["script"]["auto_step"]["chosen_line"] == 4:
        # Beside a busy process its first watched iterations can average over the 2.5 µs a step
        # must take (2.84 µs in 70,619 of them, seen at this stop's end beside a clean clone's
        # suite): then the rule makes it the steps, and it is timed as the steps are.
        assert loop["mean_us"] * 1e3 >= detect.MIN_ITERATION_NS, loop
        return
    assert not loop["candidate"], loop
    assert loop["iterations"] <= max(detect.EARLY_ITERATIONS + 1, 300_000 // 5), loop


def test_a_numpy_loop_of_a_few_microseconds_is_chosen_as_the_steps(tmp_path: Path) -> None:
    # ~3.8 µs an iteration alone here (4.5-5 µs watched): under the 5 µs the watcher once
    # required, which made the whole run one step when its first iterations ran fast.
    script = tmp_path / "few_us.py"
    script.write_text(
        "import numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(8, 8))\n"
        "y = np.ones(8)\n"
        "w = np.zeros(8)\n"
        "for step in range(300_000):\n"
        "    w -= 1e-3 * (X.T @ (X @ w - y))\n"
        "print(float(w[0]))\n"
    )
    out = cli(tmp_path, "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    assert w["script"]["auto_step"]["chosen_line"] == 6, w["script"]["auto_step"]
    # Its iterations in the watcher's first 0.25 s are not steps (~55,000 of 300,000).
    assert 150_000 < w["script"]["steps"] <= 300_000, w["script"]["steps"]
    assert w["step_time"]["median_us"] < 50, w["step_time"]


def test_what_ifs_with_no_room_are_measured_in_a_later_run_beside_the_first_runs() -> None:
    """A short fit's first run measured one what-if of three: the next run skips it and
    measures the others, and the record holds all of them (an LSTM's 126 steps)."""
    from profiler.capture.phases import whatif as phase
    from profiler.model import OK, PhaseRecord, Segment, WorkDecl, WorkloadTrace
    from profiler.model.records import WhatIfData, WhatIfResult
    from profiler.model.trace import Window
    from profiler.processes import launch

    def traced(p: PhaseRecord) -> WorkloadTrace:
        warmup = Window("warmup", (Segment(0, (1_000, 2_000)),))
        return WorkloadTrace("s", {}, WorkDecl(1, 1, 1, 1, 1), 0, warmup, phases=(p,))

    def result(id_: str) -> WhatIfResult:
        return WhatIfResult(id_, id_, (), True, "", OK, 4, (1, 1), (1, 1))

    none = ("tf1_callable", "no session.run step")
    first = PhaseRecord(
        "whatif", OK, missed=True, artefacts=("a",),
        data=WhatIfData((result("keras_jit"),), (("keras_steps_4", phase.NO_ROOM), none)),
    )  # fmt: skip
    trace = traced(first)
    assert launch._measured(trace) == {phase.SKIP_KEY: ["keras_jit"]}
    again = PhaseRecord(
        "whatif", OK, missed=False, artefacts=("b",),
        data=WhatIfData((result("keras_steps_4"),), (none,)),
    )  # fmt: skip
    merged = launch._merge(trace, traced(again), 1)
    (p,) = merged.phases
    assert [x.id for x in p.data.results] == ["keras_jit", "keras_steps_4"]
    assert p.data.not_run == (none,) and not p.missed
    assert p.artefacts == ("a", "repeat-1/b") and "repeat 1" in p.reason
    # A later run that measured nothing more leaves the record as it was: no run after it.
    empty = replace(again, status="skipped", missed=True, data=WhatIfData((), (none,)))
    same = launch._merge(trace, traced(empty), 2)
    assert same.phases[0] is first

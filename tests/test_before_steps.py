"""What a script does before its first step: the start-up capture's samples kept and parted
(``profiler.analysis.before_steps``), the time budget line, and the ``slow_start`` finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler.analysis import before_steps
from profiler.model import Frame, Sample
from tests.test_auto_step import _line
from tests.test_script_run import cli, only_run, workload, write

SCRIPT = "/home/u/prep.py"
IMPORT = Frame("_find_and_load", "<frozen importlib._bootstrap>", 1171)
RUNNER = Frame("run_path", str(Path(before_steps.__file__).parents[1] / "cli.py"), 10)
MODULE = Frame("<module>", SCRIPT, 3)


def _at(*frames: Frame, count: int = 1) -> Sample:
    return Sample((RUNNER, *frames), count, "main")


SCRIPT_RECORD = {
    "path": SCRIPT,
    "startup": {"sampled_s": 2.0},
    "time": {"before_s": 2.5, "watched_s": 0.2},
    "auto_step": {
        "chosen_line": 20,
        "loops": [{"line": 20, "end_line": 24, "function": "<module>"}],
    },
}


def test_samples_are_parted_into_imports_own_functions_watched_steps_and_other():
    samples = [
        _at(
            MODULE, IMPORT, Frame("<module>", "/v/site-packages/tensorflow/__init__.py", 5), count=4
        ),
        # A comprehension is its function's: make_data's own Python, at the comprehension's line.
        _at(
            Frame("<module>", SCRIPT, 12),
            Frame("make_data", SCRIPT, 7),
            Frame("<listcomp>", SCRIPT, 7),
            count=9,
        ),
        _at(Frame("<module>", SCRIPT, 12), Frame("make_data", SCRIPT, 8), count=1),
        # A function that ran in numpy.
        _at(
            Frame("<module>", SCRIPT, 14),
            Frame("scale", SCRIPT, 30),
            Frame("mean", "/v/site-packages/numpy/core/_methods.py", 99),
            count=3,
        ),
        # The chosen loop's iterations, watched to choose it (line 22 is inside it).
        _at(Frame("<module>", SCRIPT, 22), Frame("step", SCRIPT, 40), count=2),
        _at(count=1),
    ]
    got = before_steps.analyse(samples, SCRIPT_RECORD)
    assert got is not None and got.samples == 20 and got.sampled_s == 2.0
    by = {(p.kind, p.function): p for p in got.parts}
    make = by[("own", "make_data")]
    assert (make.samples, make.line, make.inside, make.file) == (10, 7, "its own code", "prep.py")
    assert make.seconds == pytest.approx(2.0 * 10 / 20)
    assert by[("own", "scale")].inside == "numpy"
    assert by[("imports", "")].samples == 4
    assert by[("watched", "")].samples == 2 and by[("other", "")].samples == 1
    assert next(p.kind for p in got.parts) == "own"  # largest first
    assert before_steps.label(
        **{k: getattr(make, k) for k in ("kind", "function", "file", "line", "inside")}
    ) == ("make_data (prep.py line 7) in its own code")
    # Without samples or time: not measured, not zero.
    assert before_steps.analyse([], SCRIPT_RECORD) is None
    assert before_steps.analyse(samples, {**SCRIPT_RECORD, "startup": {}}) is None


PREP = """
import numpy as np


def make_data(n):
    X = np.empty((n, 16))
    for i in range(n):
        X[i] = [((i * 7919 + j) % 1000) / 1000.0 for j in range(16)]
    return X


X = make_data(450_000)
y = X @ np.linspace(-1, 1, 16)
w = np.zeros(16)
for epoch in range(20):
    for i in range(0, len(X), 256):
        xb, yb = X[i : i + 256], y[i : i + 256]
        w -= 0.01 * xb.T @ (xb @ w - yb) / len(xb)
print("loss", float(((X @ w - y) ** 2).mean()))
"""


@pytest.mark.slow
def test_a_python_data_preparation_before_the_first_step_is_named_with_its_share(tmp_path):
    """make_data builds its rows in Python (~1 s of a ~1.5 s script without the profiler);
    minibatch SGD's batch loop (``w -= ... @ ...``: its ``w`` carried from batch to batch) is
    the step, not the epoch loop with its batch loop to "vectorise"."""
    script = write(tmp_path, "prep.py", PREP)
    out = cli(tmp_path, str(script))
    assert out.returncode == 0, out.stderr[-3000:]
    w = workload(only_run(tmp_path))
    auto = w["script"]["auto_step"]
    assert auto["chosen_line"] == _line(PREP, "for i in range(0, len(X), 256):"), auto["why"]
    parts = w["before_steps"]["parts"]
    top = parts[0]
    assert (top["kind"], top["function"], top["inside"]) == ("own", "make_data", "its own code")
    assert top["share"] >= 0.5, parts
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    (d,) = [d for d in doc["diagnoses"] if d["rule"] == "slow_start"]
    assert "in make_data (prep.py line" in d["message"] and "vectorise it" in d["fix"]
    assert d["fix"].startswith("make_data (prep.py line ")
    assert ") runs once, before training: compute it once and save" in d["fix"]
    assert not [d for d in doc["diagnoses"] if d["rule"] == "per_sample_loop"]
    assert "before its first step (make_data (prep.py line" in out.stdout


def test_the_time_budget_line_names_the_sampled_parts_and_the_runs_note_the_whatifs_runs():
    from reports import focus_view

    script = {
        "wall_s": 10.0,
        "steps": 100,
        "time": {"before_s": 6.0, "steps_s": 3.0, "after_s": 1.0},
    }
    part = {"file": "prep.py", "line": 0, "inside": "", "function": "", "seconds": 0.0}
    before = {
        "parts": [
            {
                **part,
                "kind": "own",
                "function": "make_data",
                "line": 7,
                "inside": "its own code",
                "share": 0.6,
                "seconds": 3.3,
            },
            {**part, "kind": "imports", "share": 0.3, "seconds": 1.7},
            {**part, "kind": "watched", "share": 0.05, "seconds": 0.3},
        ]
    }
    assert focus_view._budget(script, before) == (
        "The script ran 10.0 s: 6.0 s before its first step (make_data (prep.py line 7) in its "
        "own code 3.3 s; importing modules 1.7 s), 3.0 s from its first step to its last "
        "(100 steps), 1.0 s after it."
    )
    # The script's own code holding half a second is said under 10% of the start-up too
    # (word2vec's skip-gram pairs made in a Python loop: 0.53 s, 9%, beside 4.1 s of imports).
    pairs = {**part, "kind": "own", "function": "generate_training_data", "line": 46}
    pairs.update(inside="TensorFlow", share=0.09, seconds=0.53)
    tiny = {**pairs, "function": "tiny", "share": 0.02, "seconds": 0.1}
    with_pairs = {"parts": [*before["parts"], pairs, tiny]}
    said = focus_view._budget(script, with_pairs)
    assert "generate_training_data (prep.py line 46) in TensorFlow 0.5 s" in said
    assert "tiny" not in said
    # Not sampled: what it holds is said, not invented.
    assert "(imports, data, model)" in focus_view._budget(script, None)
    # What-ifs a second run measured beside the first's: the what-if phase is both runs'.
    phases = [
        {"name": "timed", "status": "ok", "repeat": 0},
        {
            "name": "whatif",
            "status": "ok",
            "repeat": 0,
            "reason": "what-ifs measured in repeat 1 of the script too",
        },
    ]
    note = focus_view._runs_note({"runs": [{"wall_s": 5.0}, {"wall_s": 4.0}]}, phases)
    assert note.endswith("timed in the first; whatif in runs 1 and 2."), note


def test_a_steps_span_mostly_beyond_steady_steps_is_split_into_the_first_steps_and_the_rest():
    """A transfer-learning tutorial: 48 steps of ~115 ms in a 25.5 s span, the first 3 taking
    5.9 s more (the train function's trace), the rest its later traces after a recompile and
    its validations: the time budget line says so, where it had only "25.5 s ... (48 steps)"."""
    from reports import focus_view

    script = {
        "wall_s": 39.8,
        "steps": 48,
        "time": {"before_s": 11.9, "steps_s": 25.5, "after_s": 2.4},
    }
    one_off = {"warmup_steps": 3, "warmup_excess_ms": 5950.0}
    line = focus_view._budget(script, None, 115_304.0, one_off)
    assert (
        "25.5 s from its first step to its last (48 steps; at the median step they would "
        "take 5.5 s: the first 3 took 6.0 s more (tracing, compiling and first calls, paid "
        "once), the others 14.0 s more (slow steps" in line
    ), line
    # Long steps after the first ones, a fifth of the rest: said within it (the tutorial's
    # fine-tuning fit, its first step after the recompile: 19.8 s against 0.86 s).
    rows = [{"step": 8, "us": 19_836_885.9, "median_us": 857_136.0, "phase": "timed"}]
    longer = {**script, "wall_s": 54.3, "time": {**script["time"], "steps_s": 40.0}}
    line = focus_view._budget({**longer, "long_steps": {"steps": rows}}, None, 115_304.0, one_off)
    assert (
        "not told apart; of them, step 8 alone took 19.0 s more than the median step (a later "
        "trace such as a recompiled model's, an evaluation, or a phase's switch))" in line
    ), line
    small = [{**rows[0], "us": 2_000_000.0}]
    line = focus_view._budget({**longer, "long_steps": {"steps": small}}, None, 115_304.0, one_off)
    assert "of them" not in line
    # More than the rest: another window's median, not said.
    line = focus_view._budget({**script, "long_steps": {"steps": rows}}, None, 115_304.0, one_off)
    assert "of them" not in line
    # A small one-off part: the rest is said, not told apart from the profiler's own phases.
    few = {**one_off, "warmup_excess_ms": 900.0}
    assert (
        "(48 steps; at the median step they would take 5.5 s, the other 20.0 s are slow steps "
        "and the time between steps (epoch ends, validations, the script's other calls, later "
        "traces, and the profiler's own phases, not told apart))"
    ) in focus_view._budget({**script, "wall_s": 30.0}, None, 115_304.0, few)
    # The instrumented phases' steps told apart where they hold a tenth of it or more (an
    # autoencoder's XLA what-if blocks, ~0.5 s a step, sat in "not told apart").
    # Less the script's own slow steps at the rate the other steps had them: 30 steps in 20 s,
    # the other 18 in 5.5 s (0.19 s a step beyond the median).
    timed = {**script["time"], "phases_s": 20.0, "phases_steps": 30}
    line = focus_view._budget({**script, "wall_s": 30.0, "time": timed}, None, 115_304.0, few)
    assert (
        "the other 20.0 s are slow steps and the time between steps (the profiler's phases "
        "10.8 s, their 30 steps' time beyond steps at the median (the what-ifs' blocks and the "
        "instruments); the rest: epoch ends, validations, the script's other calls and later "
        "traces, not told apart))"
    ) in line, line
    # Their steps as slow as the others (an evaluation every 20 batches in and out of them):
    # nothing of the profiler's to tell apart.
    light = {**timed, "phases_s": 4.0}
    line = focus_view._budget({**script, "wall_s": 30.0, "time": light}, None, 115_304.0, few)
    assert "the profiler's phases" not in line.replace("the profiler's own phases", "")
    assert "the profiler's own phases, not told apart" in line
    # Steady steps most of the span, and the steps most of the run: no line.
    steady = {**script, "wall_s": 8.0, "time": {"before_s": 0.8, "steps_s": 7.0, "after_s": 0.2}}
    small = {**one_off, "warmup_excess_ms": 300.0}
    assert focus_view._budget(steady, None, 115_304.0, small) == ""
    # ... but a one-off worth saying (TF's DeepDream tutorial: 6 calls, its first tracing,
    # ~4 s of a 10.3 s span, unsaid).
    dream = {"wall_s": 12.0, "steps": 6, "time": {"before_s": 1.5, "steps_s": 10.3, "after_s": 0.2}}
    line = focus_view._budget(
        dream, None, 1_420_000.0, {"warmup_steps": 1, "warmup_excess_ms": 2650.0}
    )
    assert (
        "(6 steps; the first step took 2.6 s more than steps at the median (tracing, compiling "
        "and first calls, paid once))" in line
    ), line


def test_the_start_up_samples_keep_only_the_frames_the_parts_read():
    """A TensorFlow script's start-up: hundreds of distinct stacks of up to ~100 frames, 3.5-5.5
    MB of the trace (whose save then failed in a script run out of memory). Kept: the script's
    own frames, the one below the innermost, one import frame; the parts are the same."""
    from profiler.capture.script.startup import compact

    tf = "/v/site-packages/tensorflow/"
    samples = [
        _at(
            MODULE,
            IMPORT,
            Frame("a", "<frozen importlib._bootstrap>", 2),
            Frame("<module>", tf + f"m{i}.py", i),
            Frame("f", tf + "x.py", 3),
            count=1,
        )
        for i in range(40)
    ] + [
        _at(
            Frame("<module>", SCRIPT, 12),
            Frame("make_data", SCRIPT, 7),
            Frame("mean", "/v/site-packages/numpy/core/_methods.py", i),
            Frame("g", "/v/site-packages/numpy/core/x.py", 1),
            count=2,
        )
        for i in range(30)
    ]
    kept = compact(samples)
    assert len(kept) == 2 and sum(s.count for s in kept) == 100
    assert max(len(s.frames) for s in kept) <= 3
    full = before_steps.analyse(samples, SCRIPT_RECORD)
    assert before_steps.analyse(kept, SCRIPT_RECORD) == full


def test_a_fits_validations_epoch_ends_and_later_fits_are_told_apart_in_the_steps_span():
    """TF's "Overfit and underfit" tutorial fits three models, 60 epochs of 20 batches each:
    92 s of its 111 s span were "slow steps and the time between steps ... not told apart".
    fit's own parts, each timed as the run went, are said with their seconds: validations
    (the last one, after the last batch, left out), the callbacks' epoch ends (the costliest
    named), the later fits' first steps; the profiler's phases less those inside them."""
    from reports import focus_view

    fit = {
        "validations_ns": [1_500_000_000, *[100_000_000] * 8, 50_000_000],
        "validations_altered": [1, 2],
        "first_validations": [0],
        "callbacks": ["TensorBoard", "EarlyStopping"],
        "epoch_ends": [["TensorBoard", 400.0, False], ["EarlyStopping", 1.0, False]] * 10,
        "call_steps": [0, 100],
    }
    rows = [
        {"step": 40, "us": 700_000.0, "median_us": 5_000.0, "phase": "timed"},
        {"step": 100, "us": 3_005_000.0, "median_us": 5_000.0, "phase": "whatif"},
    ]
    script = {
        "wall_s": 30.0,
        "steps": 200,
        "fit": fit,
        "long_steps": {"steps": rows},
        "time": {
            "before_s": 4.0,
            "steps_s": 20.0,
            "after_s": 1.0,
            "phases_s": 11.0,
            "phases_steps": 100,
        },
    }
    line = focus_view._budget(script, None, 5_000.0, {"warmup_steps": 3, "warmup_excess_ms": 50.0})
    # 9 validations: 1.5 + 8 x 0.1 s; 9 epochs' ends: 3.6 s TensorBoard's of 3.609 s; the second
    # fit's first step 3.0 s beyond the median; the phases' 100 steps took 11 s, 0.5 s at the
    # median, 0.2 s of validations and 3.0 s of the fit's first step inside them: 7.3 s.
    assert (
        "200 steps; at the median step they would take 1.0 s, the other 19.0 s are slow steps "
        "and the time between steps (fit's 9 validations 2.3 s; the callbacks' epoch ends 3.6 s "
        "(TensorBoard 3.6 s); the later fit's first step 3.0 s (fit's set-up, a new model's "
        "train function traced); the profiler's phases 7.3 s, their 100 steps' time beyond "
        "steps at the median (the what-ifs' blocks and the instruments); the rest 2.8 s, not "
        "told apart))"
    ) in line, line
    # One model fit again and again pays the set-up only (a stateful LSTM's 400 fit calls read
    # "a new model's train function traced").
    one = focus_view._budget(
        {**script, "fit": {**fit, "models": 1}},
        None,
        5_000.0,
        {"warmup_steps": 3, "warmup_excess_ms": 50.0},
    )
    assert "the later fit's first step 3.0 s (fit's set-up); " in one, one
    # A fit with none of them worth saying (5% of the time each): as before.
    few = {**fit, "validations_ns": [1_000_000, 1_000_000], "epoch_ends": [], "call_steps": [0]}
    line = focus_view._budget({**script, "fit": few}, None, 5_000.0, None)
    assert "fit's" not in line and "the rest: epoch ends, validations" in line, line


def test_autographs_conversion_of_a_function_is_not_the_users_own_code() -> None:
    # TensorFlow's distributed training tutorial: the start of its first step, tracing, read
    # "tf__distributed_train_step (__autograph_generated_filejgpoesja.py line 10) in its own
    # code"; the script's own line that called it is its own.
    from profiler.model import Frame, is_own_frame

    converted = Frame("tf__step", "/tmp/__autograph_generated_filejgpoesja.py", 10)
    assert not is_own_frame(converted)
    assert is_own_frame(Frame("<module>", "/home/me/train.py", 153))


def test_python_autograph_converted_is_named_as_the_script_wrote_it() -> None:
    # TF's data performance guide: a map's tf.py_function of a lambda read "runs Python
    # outer_factory.<locals>.inner_factory.<locals>.tf__mapped_function.<locals>.<lambda>
    # (__autograph_generated_fileo8segxup.py:10)".
    from profiler.capture.script import pipeline

    space: dict = {}
    code = "def mapped_function():\n    return lambda x: x\n"
    exec(compile(code, "/tmp/__autograph_generated_fileo8segxup.py", "exec"), space)
    fn = space["mapped_function"]()
    fn.__qualname__ = (
        "outer_factory.<locals>.inner_factory.<locals>.tf__mapped_function.<locals>.<lambda>"
    )
    assert pipeline._where(fn) == "mapped_function.<locals>.<lambda> (as AutoGraph converted it)"
    exec(compile(code, "/home/me/train.py", "exec"), space)
    assert pipeline._where(space["mapped_function"]) == "mapped_function (train.py:1)"

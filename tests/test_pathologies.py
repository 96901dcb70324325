"""The pieces behind the pathology findings, each on its own: the loop marks and their choice,
a tf.data pipeline's description, the input-bound fixes, the looped-predict and per-sample
findings, the step blocks.

The whole findings on real scripts are in ``tests/test_realworld.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler.capture.script import detect, source
from profiler.capture.script.driver import StepDriver, blocks
from profiler.diagnoses import calls, input, loops

# --- loop marks -------------------------------------------------------------------------------

TRAINING = """
import numpy as np

def load():
    data = []
    for x in range(5):
        data.append(x)
    return data

def train(data):
    for epoch in range(2):
        for batch in data:
            loss = batch * 2
    return loss

train(load())
"""


def _src(tmp_path: Path, text: str) -> source.Source:
    path = tmp_path / "s.py"
    path.write_text(text)
    return source.load(path)


def test_every_loop_is_marked_and_loops_that_train_are_told_apart(tmp_path: Path):
    src = _src(tmp_path, TRAINING)
    sites = source.mark_loops(src)
    assert [(s.line, s.function, s.training) for s in sites] == [
        (6, "load", False),  # fills a list: no loss, no epoch, no batch
        (11, "train", True),  # for epoch in ...
        (12, "train", True),  # for batch in ...; a loss
    ]
    text = ast.unparse(src.tree)
    assert text.count(source.LOOP_MARK + "(") == 3 and text.count(source.LOOP_END + "(") == 3
    # The marked tree still compiles and runs with the marks defined.
    seen: list[tuple[str, int]] = []
    g = {
        source.LOOP_MARK: lambda k: seen.append(("mark", k)),
        source.LOOP_END: lambda k: seen.append(("end", k)),
        source.LOOP_ON: bytearray([1] * 3),
    }
    exec(src.compile(), g)
    assert seen.count(("mark", 0)) == 5 and seen.count(("mark", 2)) == 10
    assert seen.count(("end", 2)) == 2 and seen[-1] == ("end", 1)


class _Clock:
    """A clock the test advances by hand."""

    def __init__(self) -> None:
        self.t = 1

    def __call__(self) -> int:
        return self.t


def _site(k: int, line: int, training: bool = True) -> source.LoopSite:
    return source.LoopSite(k, line, 0, "for", "f", training)


def _run_loops(marks: detect.LoopMarks, clock: _Clock, epochs: int, batches: int, batch_ns: int):
    for _ in range(epochs):
        marks.mark(0)
        for _ in range(batches):
            marks.mark(1)
            for _ in range(10):  # ten samples a batch
                marks.mark(2)
                clock.t += batch_ns // 10
            marks.end(2)
        marks.end(1)
    marks.end(0)


def test_the_loop_nearest_a_training_step_is_chosen_and_its_iterations_become_steps():
    clock = _Clock()
    driver = _free_driver(clock)
    sites = [_site(0, 10), _site(1, 11), _site(2, 12)]
    marks = detect.LoopMarks(driver, sites)
    # Epochs of 200 batches of 2 ms (ten samples of 0.2 ms each): the batch loop is nearest
    # the 10 ms target (the epoch loop is 0.4 s, a sample 0.2 ms).
    _run_loops(marks, clock, epochs=3, batches=200, batch_ns=2_000_000)
    assert marks.decided and sites[marks.chosen].line == 11
    assert "line 11" in marks.why and "2,000.0 µs" in marks.why
    # Steps from the decision on: every later batch is one (the first second watched is not).
    assert 3 * 200 - 600 < driver.done <= 3 * 200
    assert driver.done == marks.counter.steps
    assert driver.block == 0  # the loop's last step ended with the loop
    record = marks.record()
    assert record["chosen_line"] == 11
    assert {lp["line"] for lp in record["loops"]} == {10, 11, 12}


def test_a_loop_of_a_function_called_again_and_again_waits_for_the_loop_around_it():
    # min-char-rnn: the training loop's first iteration runs a gradient check calling lossFun
    # (its loop over 25 characters) 100 times, ~0.3 s; the character loop was chosen after
    # 0.25 s, its 37 µs iterations the steps ("one step in every 25 is 50x a normal step").
    clock = _Clock()
    driver = _free_driver(clock)
    sites = [_site(0, 108), _site(1, 41)]
    marks = detect.LoopMarks(driver, sites)

    def loss_fun() -> None:
        for _ in range(25):
            marks.mark(1)
            clock.t += 40_000
        marks.end(1)

    for n in range(400):
        marks.mark(0)
        for _ in range(100 if n % 100 == 0 else 1):  # the check every 100th iteration
            loss_fun()
        clock.t += 100_000
    marks.end(0)
    assert marks.decided and sites[marks.chosen].line == 108, marks.why
    # A batch loop inside an epoch's, ending once an epoch, is chosen without waiting:
    # test_the_loop_nearest_a_training_step_is_chosen_and_its_iterations_become_steps.


def _free_driver(clock: _Clock) -> StepDriver:
    """A driver with no schedule behind it (its steps are counted, nothing waits for them)."""
    driver = StepDriver(clock)
    driver.run_free()
    driver.started = False
    return driver


def test_loops_that_do_not_train_are_not_watched_when_some_do():
    clock = _Clock()
    driver = _free_driver(clock)
    marks = detect.LoopMarks(driver, [_site(0, 5, training=False), _site(1, 9)])
    for _ in range(5000):  # a long data-loading loop first
        marks.mark(0)
        clock.t += 1_000_000
    marks.end(0)
    assert not marks.decided and marks.count[0] == 0
    for _ in range(300):
        marks.mark(1)
        clock.t += 5_000_000
    assert marks.decided and marks.chosen == 1


def test_a_script_calling_fit_has_no_loop_of_its_own_chosen_unless_one_trains():
    # The siamese example builds its pairs in a loop before fit: beside a busy process that
    # loop ran over the watcher's second and was chosen as the steps ("Python 100%").
    src = source.Source(
        Path("siamese.py"),
        ast.parse(
            "import random\n"
            "pairs = []\n"
            "for i in range(100000):\n"
            "    pairs.append(random.random())\n"
            "model.fit(pairs, epochs=3)\n"
        ),
    )
    assert source.calls_fit(src)
    assert not source.calls_fit(source.Source(Path("s.py"), ast.parse("f(x)\n")))
    clock = _Clock()
    driver = _free_driver(clock)
    marks = detect.LoopMarks(driver, [_site(0, 3, training=False)], fits=True)
    for _ in range(5000):
        marks.mark(0)
        clock.t += 1_000_000
    marks.end(0)
    assert not marks.decided and marks.chosen == -1 and driver.done == 0
    # Without fit, the same loop is a candidate (a loop naming no training is all there is).
    marks = detect.LoopMarks(_free_driver(clock), [_site(0, 3, training=False)])
    for _ in range(5000):
        marks.mark(0)
        clock.t += 1_000_000
    assert marks.decided and marks.chosen == 0


def test_framework_steps_found_first_win_over_the_loops():
    clock = _Clock()
    driver = _free_driver(clock)
    marks = detect.LoopMarks(driver, [_site(0, 3)])
    driver.begin()  # a session.run / tf.function / fit step started
    marks.mark(0)
    assert marks.decided and marks.chosen == -1
    assert "framework" in marks.why
    for _ in range(100):
        marks.mark(0)
    assert driver.done == 0


# --- step blocks -------------------------------------------------------------------------------


def test_blocks_give_each_epochs_median_step():
    import array

    ends = array.array("q")
    t = 0
    for i in range(30):
        t += 10 if i < 10 else 2
        ends.append(t)
    rows = blocks(0, ends, 10)
    assert [r["median_us"] for r in rows] == [0.01, 0.002, 0.002]
    assert rows[1]["from_step"] == 10 and rows[1]["to_step"] == 19
    assert blocks(0, ends, 10, first_step=25)[0]["from_step"] == 25


# --- input-bound fixes -------------------------------------------------------------------------

SERIAL_PY = {
    "iterations": 3,
    "auto_prefetch": True,
    "auto_parallel": True,
    "stages": [
        {"kind": "from_tensor_slices"},
        {"kind": "map", "function": "prep (t.py:3)", "python": "slow (t.py:1)"},
        {"kind": "batch", "detail": "32"},
    ],
}


def test_a_python_map_gets_a_cache_and_a_rewrite_not_parallel_calls_or_a_prefetch():
    fix = input.fixes(SERIAL_PY, 30_000, 8_000, 3)
    assert fix.startswith(".cache() right after map(prep)")
    assert "instead of 3 times" in fix
    assert "slow (t.py:1)" in fix and "GIL" in fix
    # tf.data injects a prefetch itself here, and says so; parallel calls of a py_function do
    # not help.
    said = "an explicit .prefetch() changes nothing here."
    assert fix.endswith(said) and ".prefetch(tf.data" not in fix
    assert "num_parallel_calls" not in fix
    assert said not in input.fixes({**SERIAL_PY, "auto_prefetch": None}, 30_000, 8_000, 3)
    # Python that mostly waits (the data performance guide's map sleeping 30 ms an element:
    # 35% less a step with parallel calls, without the profiler) releases the GIL as it waits.
    waits = input.fixes(SERIAL_PY, 30_000, 8_000, 3, python_waits=True)
    assert "mostly waits" in waits and "map(prep, num_parallel_calls=tf.data.AUTOTUNE)" in waits
    assert "holds the GIL" not in waits


def test_a_random_map_is_not_cached_and_a_stateful_map_is_parallelised():
    pipe = {
        "auto_prefetch": False,
        "auto_parallel": True,
        "stages": [
            {"kind": "tfrecord"},
            {"kind": "map", "function": "augment (t.py:9)", "random": True},
        ],
    }
    fix = input.fixes(pipe, 30_000, 8_000, 5)
    assert ".cache()" not in fix
    assert "map(augment, num_parallel_calls=tf.data.AUTOTUNE)" in fix
    # Without tf.data's own prefetch: the saving is bounded by the rest of the step.
    assert ".prefetch(tf.data.AUTOTUNE)" in fix and "up to 8,000 µs" in fix


def test_one_epoch_gets_no_cache_and_a_complete_pipeline_gets_the_element_cost():
    assert ".cache()" not in input.fixes(SERIAL_PY, 30_000, 8_000, 1)
    done = {
        "auto_prefetch": True,
        "stages": [
            {"kind": "range"},
            {"kind": "map", "function": "f (t.py:1)", "parallel": "AUTOTUNE"},
            {"kind": "cache"},
            {"kind": "prefetch", "detail": "AUTOTUNE"},
        ],
    }
    assert input.fixes(done, 30_000, 8_000, 4).startswith("The pipeline already")
    # Timed in the first epoch, while that cache filled (a fit of 8 epochs: 18.8 ms a step in
    # its first, 7.5 ms in its last): the later epochs read the cache.
    first = input.fixes(done, 8_039, 10_668, 8, first_epoch=True)
    assert first.startswith(
        "The timed steps ran in the first of 8 epochs, while the .cache() after map(f) was "
        "filling: only that epoch runs the map (8,039 µs a step waiting for it)"
    )
    assert "cache what does not change" not in first
    assert input.fixes(done, 8_039, 10_668, 1, first_epoch=True).startswith("The pipeline already")


def test_the_timed_window_in_a_fits_first_epoch():
    from profiler.model.trace import Segment

    def trace(first: int, n: int, per_epoch: int | None) -> SimpleNamespace:
        window = SimpleNamespace(segments=(Segment(first, tuple(range(n + 1))),))
        timed = SimpleNamespace(window=window)
        return SimpleNamespace(
            script={"fit": {"steps_per_epoch": per_epoch}}, phase=lambda name: timed
        )

    assert input._timed_in_first_epoch(trace(20, 19, 120))
    assert not input._timed_in_first_epoch(trace(110, 19, 120))
    assert not input._timed_in_first_epoch(trace(20, 19, None))


def test_the_pipeline_reads_source_to_iterator():
    text = input.describe(SERIAL_PY["stages"])
    assert text == (
        "from_tensor_slices -> map(prep, serial, runs Python slow (t.py:1)) -> batch(32)"
    )


# --- looped predict; per-sample loops ------------------------------------------------------------


def _trace(script: dict) -> SimpleNamespace:
    return SimpleNamespace(script=script)


def test_predict_called_per_sample_is_found_with_its_share_of_the_script():
    f: dict = {}
    script = {
        "wall_s": 20.0,
        "steps": 100,
        "time": {"before_s": 3.0, "steps_s": 2.0, "after_s": 15.0},
        "keras_calls": {
            "predict": {"calls": 200, "ms": 15_000.0, "samples": 200, "sized": 200},
            "evaluate": {"calls": 1, "ms": 300.0, "samples": 1000, "sized": 1},
        },
    }
    calls.call_facts(f, _trace(script))
    assert f["loop_call"] == "model.predict" and f["loop_calls"] == 200
    assert f["loop_samples_text"] == "1 sample" and f["loop_pct"] == pytest.approx(75)
    f["label"] = "s.py"
    (rule,) = [r for r in calls.RULES if r.id == "predict_in_loop"]
    assert rule.when(f)
    assert "model(x, training=False)" in f["loop_fix"]
    # A generation loop makes each input from the last output: predict_on_batch, or the model
    # in a tf.function (model(x) eagerly ran a character LSTM's timesteps op by op: no faster).
    assert "or the model in a tf.function (step = tf.function(model); " in f["loop_fix"]
    assert f["train_steps_s"] == 2.0
    # Calls made between the first step and the last are not the steps' time (a character
    # LSTM's 120 predict calls between its two fits read as training time).
    inside = {**script, "keras_calls": {"predict": {**script["keras_calls"]["predict"],
                                                    "in_steps_ms": 1_500.0}}}  # fmt: skip
    h: dict = {}
    calls.call_facts(h, _trace(inside))
    assert h["train_steps_s"] == pytest.approx(0.5)
    # Batched predictions are not a loop.
    script["keras_calls"]["predict"]["samples"] = 200 * 64
    g: dict = {}
    calls.call_facts(g, _trace(script))
    assert not rule.when(g)


def test_an_inner_loop_per_sample_is_named_with_its_share_of_the_step():
    script = {
        "auto_step": {
            "chosen_line": 40,
            "loops": [
                {"line": 35, "function": "SGD", "iterations": 1, "mean_us": None},
                {"line": 40, "function": "SGD", "iterations": 265, "mean_us": 905.0},
                {"line": 53, "function": "update", "iterations": 2640, "mean_us": 87.0},
            ],
        }
    }
    f: dict = {"step_us": 834.0, "python_dispatch_pct": 69.0, "label": "n.py"}
    loops.loop_facts(f, _trace(script))
    assert f["inner_line"] == 53 and f["step_line"] == 40
    assert f["inner_per_step"] == pytest.approx(9.96, abs=0.01)
    assert f["inner_share_pct"] == pytest.approx(95.8, abs=0.1)
    assert loops.RULES[0].when(f)
    # Arithmetic-bound steps keep their loop: no finding.
    assert not loops.RULES[0].when({**f, "python_dispatch_pct": 20.0})
    # Nor does a step whose Python time is mostly the collector's pauses (garbage_collection).
    assert not loops.RULES[0].when({**f, "python_dispatch_pct": 100.0, "gc_pct": 84.0})
    assert loops.RULES[0].when({**f, "python_dispatch_pct": 100.0, "gc_pct": 5.0})
    # A loop of the step's own function that is not inside its lines (one before it) is not
    # the step's inner loop.
    script["auto_step"]["loops"][1]["end_line"] = 50
    script["auto_step"]["loops"].append(
        {"line": 30, "function": "SGD", "iterations": 26_500, "mean_us": 9.0}
    )
    g: dict = {"step_us": 834.0, "python_dispatch_pct": 69.0, "label": "n.py"}
    loops.loop_facts(g, _trace(script))
    assert g["inner_line"] == 53
    # The step loop's iterations that ended while watched: the 265th began the steps and its
    # samples were not counted, so a step holds 10 of them (Nielsen's mini-batch), not 9.96.
    script["auto_step"]["loops"][1]["timed"] = 264
    h: dict = {"step_us": 834.0, "python_dispatch_pct": 69.0, "label": "n.py"}
    loops.loop_facts(h, _trace(script))
    assert h["inner_per_step"] == 10.0


def test_blocks_keep_a_trimmed_mean_for_bimodal_steps():
    import array

    ends = array.array("q")
    t = 0
    for i in range(40):  # two session.run calls a step: 2 and 20 time units, alternating
        t += 2 if i % 2 else 20
        ends.append(t)
    (row,) = blocks(0, ends, 40)
    assert row["mean_us"] == pytest.approx(0.011)


def test_a_steady_rise_is_told_from_noise_around_a_level():
    from profiler.analysis import stats

    xs = [float(i) for i in range(9)]
    rising = [10.0 + i + (0.5 if i % 3 == 0 else 0.0) for i in range(9)]
    noisy = [282, 285, 296, 303, 328, 319, 211, 192, 246]  # a loaded machine's drift
    assert stats.rising_share(xs, rising) > 0.9
    assert stats.theil_sen(xs, rising) == pytest.approx(1.0, abs=0.3)
    assert stats.rising_share(xs, [float(y) for y in noisy]) < 0.6


def test_a_generator_or_a_pipeline_without_a_map_is_not_told_it_maps_in_parallel():
    gen = {
        "stages": [
            {"kind": "from_generator", "python": "DataGenerator.__getitem__ (s.py:40)"},
            {"kind": "prefetch"},
        ]
    }
    fix = input.fixes(gen, 30_000, 8_000, 3, fit=True)
    assert fix.startswith("The batches come from Python (DataGenerator.__getitem__ (s.py:40))")
    assert "workers=N" in fix and "maps in parallel" not in fix
    assert "Yield whole batches" not in fix
    # A generator of samples batched by tf.data in a custom loop (not fit): whole batches or
    # arrays first (5.1 s an epoch as written, 1.3 s either way, without the profiler), and
    # no Keras PyDataset.
    samples = {"stages": [{"kind": "from_generator", "python": "gen (s.py:9)"},
                          {"kind": "shuffle", "detail": "1000"}, {"kind": "batch"}],
               "auto_prefetch": True}  # fmt: skip
    fix = input.fixes(samples, 6_657, 1_139, 3)
    assert fix.startswith("The samples come from Python (gen (s.py:9)), one at a time")
    assert "Yield whole batches from the generator" in fix and "from_tensor_slices" in fix
    assert "PyDataset" not in fix
    plain = {"stages": [{"kind": "from_tensor_slices"}, {"kind": "batch"}, {"kind": "prefetch"}]}
    fix = input.fixes(plain, 30_000, 8_000, 3)
    assert "without a map" in fix and "maps in parallel" not in fix


def test_an_inner_loops_iteration_is_given_at_the_timed_steps_speed():
    # Timed while the watcher chose the steps (beside the start-up capture), Nielsen's loop
    # read 683 µs an iteration, 10 a step, in a 1,020 µs timed step: its share holds, its
    # absolute time does not (~74 µs by truth).
    trace = SimpleNamespace(
        script={
            "auto_step": {
                "chosen_line": 39,
                "loops": [
                    {
                        "line": 39,
                        "function": "SGD",
                        "end_line": 41,
                        "iterations": 40,
                        "mean_us": 6900.0,
                    },
                    {
                        "line": 50,
                        "function": "update_mini_batch",
                        "iterations": 400,
                        "mean_us": 683.4,
                    },
                ],
            }
        }
    )
    f = {"step_us": 1020.0}
    loops.loop_facts(f, trace)
    assert f["inner_line"] == 50 and f["inner_per_step"] == 10
    assert f["inner_share_pct"] == pytest.approx(100 * 6834 / 6900)
    assert f["inner_us"] == pytest.approx(1020 * 6834 / 6900 / 10)


def test_an_inner_loop_timed_slightly_over_its_step_is_still_its_inner_loop():
    # Nielsen's run: 10 iterations of 446 µs in a 4,013 µs step (1.11 of it) beside a loop
    # deeper down holding 34%: the per-sample loop is the step's, not the 34% one.
    loops_ = [
        {"line": 39, "function": "SGD", "end_line": 40, "iterations": 52, "mean_us": 4013.2},
        {"line": 50, "function": "update_mini_batch", "iterations": 520, "mean_us": 446.1},
        {"line": 74, "function": "backprop", "iterations": 519, "mean_us": 135.5},
    ]
    trace = SimpleNamespace(script={"auto_step": {"chosen_line": 39, "loops": loops_}})
    f = {"step_us": 1123.0}
    loops.loop_facts(f, trace)
    assert f["inner_line"] == 50 and f["inner_share_pct"] == 100.0


def test_a_recurrent_loop_is_not_told_to_vectorise_and_sibling_loops_are_named_together():
    # min-char-rnn: its forward and backward loops over 25 characters hold 37% and 47% of a
    # step (neither was named: "no finding fired"), and each hands state to the next
    # iteration (hs[t - 1], dhnext): "vectorise ... 25x the data" cannot apply.
    script = {
        "auto_step": {
            "chosen_line": 72,
            "loops": [
                {"line": 27, "end_line": 33, "function": "lossFun", "carried": ["hs"],
                 "iterations": 2500, "timed": 2500, "mean_us": 32.4},
                {"line": 37, "end_line": 47, "function": "lossFun", "carried": ["dhnext"],
                 "iterations": 2500, "timed": 2500, "mean_us": 41.6},
                {"line": 48, "end_line": 49, "function": "lossFun", "carried": [],
                 "iterations": 500, "timed": 500, "mean_us": 7.3},
                {"line": 72, "end_line": 91, "function": "<module>", "carried": [],
                 "iterations": 101, "timed": 100, "mean_us": 2206.0},
            ],
        }
    }  # fmt: skip
    f: dict = {"step_us": 1_000.0, "python_dispatch_pct": 70.0, "label": "m.py"}
    loops.loop_facts(f, _trace(script))
    assert f["inner_share_pct"] == pytest.approx(100 * 25 * (32.4 + 41.6) / 2206, abs=0.1)
    assert f["inner_where"] == "the loops at lines 27 and 37 (lossFun) 25, 25 times each"
    assert loops.RULES[0].when(f)
    assert f["inner_fix"].startswith(
        "Keep only the recurrence inside the loops at lines 27 and 37, whose iterations depend "
        "on the one before (line 27 hands `hs` on; line 37 hands `dhnext` on), so it cannot "
        "become one call"
    )
    assert "Vectorise" not in f["inner_fix"]
    # The same loops on Python numbers, no kernel or per-call cost sampled (Brownlee's
    # logistic regression on lists was told "dW += a @ b.T ... one product of the stacked
    # arrays"): what they repeat once per item, and the minibatch.
    p: dict = {"step_us": 1_000.0, "python_dispatch_pct": 100.0, "label": "m.py"}
    p.update(compute_us=0.0, dispatch_us=0.0)
    loops.loop_facts(p, _trace(script))
    assert p["inner_fix"].startswith(
        "The loops at lines 27 and 37 run on Python numbers, and their iterations depend"
    ), p["inner_fix"]
    assert "compute once what their inner lines repeat" in p["inner_fix"]
    assert "a @ b.T" not in p["inner_fix"] and "minibatch" in p["inner_fix"]
    # A backward loop holding half the step alone still has its forward sibling beside it
    # (a quiet run read 50% and named line 37 alone; beside a busy process both, 62%).
    script["auto_step"]["loops"][1]["mean_us"] = 44.2  # 25 x 44.2 / 2206: 50.1%
    g: dict = {"step_us": 1_000.0, "python_dispatch_pct": 70.0, "label": "m.py"}
    loops.loop_facts(g, _trace(script))
    assert g["inner_where"] == "the loops at lines 27 and 37 (lossFun) 25, 25 times each"


def test_sibling_loops_of_two_functions_are_named_together_unless_one_calls_the_other():
    # cs231n's naive convolution: conv_forward_naive's and conv_backward_naive's loops, 45%
    # and 53% of a step, called one after the other; the backward one alone was named.
    from profiler.model.trace import Frame, Sample

    script = {
        "auto_step": {
            "chosen_line": 60,
            "loops": [
                {"line": 17, "end_line": 21, "function": "conv_forward_naive", "carried": [],
                 "iterations": 400, "timed": 400, "mean_us": 1_125.0},
                {"line": 29, "end_line": 36, "function": "conv_backward_naive", "carried": [],
                 "iterations": 400, "timed": 400, "mean_us": 1_325.0},
                {"line": 60, "end_line": 80, "function": "<module>", "carried": [],
                 "iterations": 51, "timed": 50, "mean_us": 20_000.0},
            ],
        }
    }  # fmt: skip

    def stacks(*chains: tuple[tuple[str, int], ...]) -> SimpleNamespace:
        samples = tuple(Sample(tuple(Frame(n, line=ln) for n, ln in c), 5) for c in chains)
        return SimpleNamespace(script=script, phases=[SimpleNamespace(samples=samples)])

    # Both called from the step loop (<module>, lines 60-80), neither from the other's loop.
    apart = stacks(
        (("<module>", 66), ("conv_forward_naive", 21)),
        (("<module>", 70), ("conv_backward_naive", 34)),
    )
    f: dict = {"step_us": 20_000.0, "python_dispatch_pct": 80.0, "label": "c.py"}
    loops.loop_facts(f, apart)
    assert f["inner_where"] == (
        "the loops at lines 17 (conv_forward_naive) and 29 (conv_backward_naive) 8, 8 times each"
    )
    assert f["inner_share_pct"] == pytest.approx(100 * 8 * (1_125 + 1_325) / 20_000)
    assert f["inner_fix"].startswith("Vectorise the loops at lines 17 and 29 over its items")
    # Its saving, a lower bound: the overhead in the loops less one call's worth (Nielsen's
    # network.py read 64% overhead; its mini-batch as one matrix was 79% faster, measured).
    least = 0.8 * 20_000.0 * f["inner_share_pct"] / 100 * (1 - 1 / 8)
    assert (
        f"at least {least:,.0f} µs less per step, predicted from this run's figures"
        in (f["inner_fix"])
    )
    assert loops.RULES[0].when(f)
    # One called inside the other's loop: nested, not siblings; the larger alone.
    inside = stacks((("<module>", 66), ("conv_forward_naive", 19), ("conv_backward_naive", 30)))
    g: dict = {"step_us": 20_000.0, "python_dispatch_pct": 80.0, "label": "c.py"}
    loops.loop_facts(g, inside)
    assert g["inner_line"] == 29 and g["inner_where"].startswith("the loop at line 29")
    # No stacks sampled: nothing says they do not nest.
    h: dict = {"step_us": 20_000.0, "python_dispatch_pct": 80.0, "label": "c.py"}
    loops.loop_facts(h, SimpleNamespace(script=script))
    assert h["inner_line"] == 29 and h["inner_where"].startswith("the loop at line 29")


def test_inner_loops_each_under_a_tenth_of_the_step_name_the_largest_and_fire_nothing():
    # A collector-bound script's loops each held a few per cent of its step: grouping found
    # none at a tenth, and the run ended in an IndexError.
    script = {
        "auto_step": {
            "chosen_line": 30,
            "loops": [
                {"line": 12, "end_line": 14, "function": "build", "iterations": 400,
                 "timed": 400, "mean_us": 20.0},
                {"line": 16, "end_line": 17, "function": "build", "iterations": 400,
                 "timed": 400, "mean_us": 10.0},
                {"line": 30, "end_line": 33, "function": "<module>", "iterations": 40,
                 "timed": 40, "mean_us": 5_000.0},
            ],
        }
    }  # fmt: skip
    f: dict = {"step_us": 5_000.0, "python_dispatch_pct": 70.0, "label": "c.py"}
    loops.loop_facts(f, _trace(script))
    assert f["inner_line"] == 12 and f["inner_share_pct"] == pytest.approx(4.0)
    assert not loops.RULES[0].when(f)


def test_the_state_a_loop_carries_from_one_iteration_to_the_next():
    import ast

    from profiler.capture.script.source import carried

    def of(src: str) -> tuple[str, ...]:
        loop = ast.parse(src).body[0]
        assert isinstance(loop, (ast.For, ast.While))
        return carried(loop)

    backward = """
for t in reversed(range(len(inputs))):
    dy = np.copy(ps[t])
    dy[targets[t]] -= 1
    dWhy += np.dot(dy, hs[t].T)
    dh = np.dot(Why.T, dy) + dhnext
    dhraw = (1 - hs[t] * hs[t]) * dh
    dWhh += np.dot(dhraw, hs[t - 1].T)
    dhnext = np.dot(Whh.T, dhraw)
"""
    forward = """
for t in range(len(inputs)):
    xs[t] = np.zeros((vocab_size, 1))
    xs[t][inputs[t]] = 1
    hs[t] = np.tanh(np.dot(Wxh, xs[t]) + np.dot(Whh, hs[t - 1]) + bh)
    loss += -np.log(ps[t][targets[t], 0])
"""
    nielsen = """
for x, y in mini_batch:
    delta_nabla_b, delta_nabla_w = self.backprop(x, y)
    nabla_b = [nb + dnb for nb, dnb in zip(nabla_b, delta_nabla_b)]
    total = total + cost(x, y)
"""
    cs231n = """
for i in range(num_train):
    scores = X[i].dot(W)
    for j in range(num_classes):
        margin = scores[j] - scores[y[i]] + 1
        if margin > 0:
            loss += margin
            dW[:, j] += X[i]
"""
    assert of(backward) == ("dhnext",)
    assert of(forward) == ("hs",)
    assert of(nielsen) == ()  # sums over the samples vectorise
    assert of(cs231n) == ()
    assert of("for i in range(n):\n    h = np.tanh(W @ x[i] + U @ h)\n") == ("h",)
    # Per-sample SGD over (user, item, rating) triples (a matrix factorisation): the rows
    # an iteration updates in place are those later samples of that user or item read.
    mf_sgd = """
for i, j, r in self.samples:
    prediction = self.get_rating(i, j)
    e = r - prediction
    self.b_u[i] += self.alpha * (e - self.beta * self.b_u[i])
    self.P[i, :] += self.alpha * (e * self.Q[j, :] - self.beta * self.P[i, :])
    self.Q[j, :] += self.alpha * (e * self.P[i, :] - self.beta * self.Q[j, :])
"""
    assert of(mf_sgd) == ("self.b_u", "self.P", "self.Q")
    assert of("for x, y in data:\n    counts[y] += 1\n    total += x\n") == ()  # written only
    own = "for i, x in enumerate(xs):\n    out[i] = f(x)\n    s = s + out[i]\n"
    assert of(own) == ()  # read at the iteration's own index


def test_a_fit_whose_pipeline_caches_after_a_map_warms_up_through_its_first_epoch():
    # A fit of 8 epochs over 12,000 mapped images, cached: 18.8 ms a step in its first epoch
    # (the map runs, the cache fills), 7.5 ms in its last; every window was in the first.
    from profiler.capture.script.pipeline import Pipeline, Pipelines, Stage
    from profiler.capture.script.schedule import Schedule

    def warm_until(kinds: list[str], epochs: int) -> int:
        pipes = Pipelines()
        pipes.seen[1] = (None, Pipeline([Stage(k) for k in kinds]))
        fit = {"steps_per_epoch": 120, "epochs": epochs, "first_step": 0}
        driver = SimpleNamespace(facts=SimpleNamespace(fit=fit, pipelines=pipes))
        return Schedule._cache_filled(SimpleNamespace(driver=driver))

    assert warm_until(["range", "map", "cache", "batch", "prefetch"], 8) == 120
    assert warm_until(["range", "map", "batch", "prefetch"], 8) == 0  # no cache
    assert warm_until(["range", "cache", "map", "batch"], 8) == 0  # the map after it
    assert warm_until(["range", "map", "cache", "batch"], 2) == 0  # too few epochs left


def test_a_first_epoch_filling_a_cache_is_named_with_its_excess():
    # The tf.data guide's fixed pipeline: 3 epochs of 100 batches, its first epoch runs the
    # map and fills the cache (47-50 ms a step), the later ones read it (2.6-2.9 ms).
    stages = [
        {"kind": "from_tensor_slices"},
        {"kind": "map", "function": "mapped_function (t.py:33)", "parallel": "AUTOTUNE"},
        {"kind": "cache", "detail": "memory"},
        {"kind": "batch", "detail": "32"},
    ]

    def facts(warm: int, excess_s: float, stages: list = stages) -> dict:
        script = {
            "fit": {"steps_per_epoch": 100, "epochs": 3},
            "pipelines": [{"stages": stages, "iterations": 3}],
            "time": {"steps_s": 5.6},
            "steps": 300,
        }
        warmup = SimpleNamespace(durations_ns=lambda: (1,) * warm)
        f: dict = {"label": "t.py"}
        # Steady steps of 3 ms; the first step 3 ms + first_s beyond them.
        total = int(excess_s * 1e9) + warm * 3_000_000
        one_off = SimpleNamespace(
            warmup_excess_ns=int(excess_s * 1e9),
            warmup_total_ns=total,
            first_step_ns=3_000_000 + int(first_s * 1e9),
        )
        input.cache_fill_facts(f, SimpleNamespace(script=script, warmup=warmup), one_off)
        return f

    first_s = 0.05
    f = facts(100, 4.7)
    (rule,) = [r for r in input.RULES if r.id == "cache_fill"]
    assert rule.message.format(**f) == (
        "t.py's first epoch, where the .cache() after map(mapped_function) filled, took 4.7 s "
        "beyond the later epochs' pace (its first step aside, which traces): 83% of the loop's "
        "5.6 s. The later 2 epochs' steps read the cache, and the split above describes them."
    )
    assert f["fill_cost_us"] == pytest.approx(4.65e6 / 300)
    # The image-loading tutorial: its first step (the train function's trace, and the whole
    # data set decoded into the cache to fill a shuffle buffer larger than it) held most of
    # the first epoch's excess; the rest is under a tenth of the loop.
    first_s = 4.4
    assert "fill_s" not in facts(100, 4.7)
    first_s = 0.05
    assert "fill_s" not in facts(20, 4.7)  # the warm-up ended inside the first epoch
    assert "fill_s" not in facts(100, 0.3)  # under a tenth of the loop
    assert "fill_s" not in facts(100, 4.7, stages[:2] + stages[3:])  # no cache


def test_retraces_outside_the_sampled_steps_are_costed_by_the_first_trace():
    # A seq2seq step unrolled over its target length (44-47): retraced 3 times in 57 steps,
    # ~50 s a trace, 90% of its 276 s loop; none fell in the sampled steps: "compute 66%".
    from profiler.diagnoses import performance
    from profiler.model import Segment, Window

    s = 1_000_000_000
    warm = Window("warmup", (Segment(0, (0, 58 * s, 58 * s + s // 10, 101 * s)),))
    timed = SimpleNamespace(
        window=Window("timed", (Segment(3, tuple(i * s // 2 for i in range(11))),))
    )
    fn = {"name": "train_step", "calls": 60, "retraces": 3, "trace_steps": [3, 4, 6],
          "changed": {"targ": {"times": 3, "what": "a tensor"}}, "own": True}  # fmt: skip
    script = {"functions": [fn], "steps": 60, "time": {"steps_s": 276.0}}
    trace = SimpleNamespace(script=script, warmup=warm, phase={"timed": timed}.get)
    f: dict = {"label": "s.py", "tracing_pct": 0.0}
    performance._retrace_facts(f, trace)
    (rule,) = [r for r in performance.RULES if r.id == "costly_retraces"]
    assert rule.when(f)
    assert rule.message.format(**f) == (
        "s.py: tf.function train_step retraced 3 times in 57 steady-state steps: targ (a "
        "tensor) differs from the previous call at each retrace. Its first call (its first "
        "trace) took 57.5 s beyond a step, so its retraces cost about 172 s, 62% of the loop's "
        "276 s (none fell in the sampled steps)."
    )
    assert f["retrace_fix"].startswith("Give train_step an input_signature with None")
    # Where the sampled steps held the retraces, retracing itself reads their share.
    assert not rule.when({**f, "tracing_pct": 40.0})


@pytest.mark.tf
def test_a_pipeline_gone_makes_room_for_the_trainings_own() -> None:
    # A FeatureSpace's adapt iterates a dataset per feature and drops it: the four kept were
    # those, and the training's own pipeline, iterated later, was left out.
    import gc

    import tensorflow as tf

    from profiler.capture.script.pipeline import MAX_PIPELINES, Pipelines

    pipes = Pipelines()
    adapt = [tf.data.Dataset.range(10).map(lambda x, k=k: x + k) for k in range(MAX_PIPELINES)]
    for ds in adapt:
        pipes.iterated(ds)
    kept = tf.data.Dataset.range(10).batch(2)
    pipes.iterated(kept)
    assert len(pipes.seen) == MAX_PIPELINES and id(kept) not in pipes.seen  # all alive
    del adapt, ds
    gc.collect()
    pipes.iterated(kept)
    assert id(kept) in pipes.seen and pipes.others == 2
    assert [s.kind for s in pipes.seen[id(kept)][1].stages][:2] == ["range", "batch"]


@pytest.mark.tf
def test_a_tf1_graphs_one_shot_iterator_records_the_pipeline_it_reads() -> None:
    # A TF1 script's py_func map feeding session.run through make_one_shot_iterator read "not
    # recorded (no tf.data iterated)": no Python iteration of the dataset ever happened.
    import tensorflow as tf
    from tensorflow.python.data.ops import dataset_ops

    from profiler.capture.script import detect
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import FakeClock

    d = StepDriver(FakeClock())
    make = detect.wrap_graph_iterator(vars(dataset_ops.DatasetV1)["_make_one_shot_iterator"], d)
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(10).map(lambda x: x * 2).batch(2)
        it = make(dataset_ops.DatasetV1Adapter(ds))
        assert it is not None
    (pipe,) = d.facts.pipelines.to_json()
    assert [s["kind"] for s in pipe["stages"]][:3] == ["range", "map", "batch"], pipe

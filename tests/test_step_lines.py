"""A line of the script's own code inside its steps that holds much of each step is named
with its line, its function and a fix that fits where it runs (``profiler.diagnoses.step_lines``).

Truth, measured without the profiler on this machine: a Keras ``fit`` whose callback calls
``model.evaluate`` on held-out rows at every batch end took 256-304 ms a batch, 7.5-10 ms
without the callback (125 and 500 batches, 2 repeats each): the callback is ~97% of a batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import recorded
from tests.recorded import MODES, profiled
from tests.test_script_run import write

FIT = """
import numpy as np
import tensorflow as tf

x = np.random.rand(1600, 20).astype("float32")
y = (x.sum(axis=1) > 10).astype("float32")


class BatchEnd(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        {work}


model = tf.keras.Sequential(
    [tf.keras.Input((20,)), tf.keras.layers.Dense(16), tf.keras.layers.Dense(1)]
)
model.compile("adam", "mse")
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[BatchEnd()])
"""
EVALUATE = "self.last = self.model.evaluate(x[:64], y[:64], verbose=0)"
CHEAP = "self.last = float(logs['loss'])"


#: The phases the fit_cb.py runs measure (and were recorded with).
OPTIONS = ("--phases", "timed,lines")
#: The recorded runs of fit_cb.py by its callback's work (``record``).
RECORDED = {EVALUATE: "step_lines_fit_evaluate", CHEAP: "step_lines_fit_cheap"}


def _found(tmp_path: Path, work: str, mode: str) -> dict[str, dict]:
    script = write(tmp_path, "fit_cb.py", FIT.replace("{work}", work))
    return profiled(mode, tmp_path, script, *OPTIONS, name=RECORDED[work]).findings


def record() -> None:
    """Record fit_cb.py's runs (``python -m tests.test_step_lines``)."""
    import tempfile

    for work, name in RECORDED.items():
        script = write(Path(tempfile.mkdtemp()), "fit_cb.py", FIT.replace("{work}", work))
        print(recorded.record_script(script, name, *OPTIONS))


@pytest.mark.parametrize("mode", MODES)
def test_a_callback_evaluating_every_batch_is_named_with_its_line_and_a_per_batch_fix(
    tmp_path: Path, mode: str
) -> None:
    found = _found(tmp_path, EVALUATE, mode)
    d = found["step_line"]
    assert f"line 11 of BatchEnd.on_train_batch_end (`{EVALUATE}`)" in d["message"]
    share = float(d["message"].split(") holds ")[1].split("%")[0])
    assert 70 <= share <= 100, d["message"]
    assert "every N batches" in d["fix"] and "validation_data" in d["fix"]


@pytest.mark.parametrize("mode", MODES)
def test_a_callback_reading_its_logs_gets_no_finding_and_fits_own_line_is_not_one(
    tmp_path: Path, mode: str
) -> None:
    # The fit(...) line holds every step (one execution spans them all): the step, not in it.
    found = _found(tmp_path, CHEAP, mode)
    assert "step_line" not in found, found.get("step_line")


@pytest.mark.parametrize(
    ("source", "logging"),
    [
        ("loop.set_postfix(loss=loss, acc=acc)", True),
        ("print(f'step {step}: {loss:.3f}')", True),
        ("logger.info('loss %f', loss)", True),
        ("writer.add_scalar('loss', loss, step)", True),
        ("wandb.log({'loss': loss})", True),
        ("loss = -np.log(probs[range(n), y]).mean()", False),
        ("grad = X.T @ err / len(y)", False),
    ],
)
def test_in_a_loop_the_automatic_step_found_only_logging_lines_count(
    source: str, logging: bool
) -> None:
    # The loop's body is the step's work (its arithmetic is no line to do less often); its
    # logging and progress bars are not (tqdm's set_postfix every step: 32-43% of a numpy
    # loop without the profiler, 41% of the lines window's step).
    from profiler.diagnoses import step_lines

    assert bool(step_lines.LOGGING_LINE.search(source)) is logging
    if logging:
        assert step_lines._fix("<module>", source).startswith(
            "Log, print or update the progress bar every N steps"
        )


@pytest.mark.parametrize(
    ("source", "whole"),
    [
        ("X_shuf, y_shuf = X_train[perm], y_train[perm]", True),
        ("x = data[shuffled_idx]", True),
        ("xb = X[perm[i : i + batch_size]]", False),
        ("imgs = X_train[idx]", False),
    ],
)
def test_a_line_copying_the_whole_data_set_in_a_new_order_is_told_to_shuffle_once(
    source: str, whole: bool
) -> None:
    # A train_on_batch loop shuffling its 60,000 rows at every batch: 91% of the step without
    # the profiler, told "logging, metrics or an evaluation every N steps".
    from profiler.diagnoses import step_lines

    fix = step_lines._fix("<module>", source)
    assert fix.startswith("It copies the whole data set in a new order at every step") is whole
    if whole:
        assert "X[perm[i:i + batch_size]]" in fix


def test_a_line_calling_a_function_that_calls_the_step_holds_the_step_and_is_not_named() -> None:
    # A DQN's loop calls agent.replay(batch_size), whose replay calls fit on one batch: that
    # line read 53% of a step, the step itself. Its env.step line, the script's own work
    # beside the step, is named.
    from types import SimpleNamespace

    from profiler.diagnoses import step_lines
    from profiler.model import LineStat, Segment, Window
    from profiler.model.records import LinesData

    ms = 1_000_000
    lines = (
        LineStat("dqn.py", 40, "DQNAgent.replay", 10, 10 * 50 * ms, "self.model.fit(s, t)"),
        LineStat("dqn.py", 90, "<module>", 10, 10 * 55 * ms, "agent.replay(batch_size)"),
        LineStat("dqn.py", 88, "<module>", 10, 10 * 30 * ms, "state = env.render_frame()"),
    )
    window = Window("lines", (Segment(0, tuple(i * 100 * ms for i in range(11))),))
    rec = SimpleNamespace(lines=lines, window=window, data=LinesData(10, ("<module>",)))
    trace = SimpleNamespace(
        script={"path": "dqn.py", "detection": {"source": "keras_fit"}},
        phase=lambda name: rec if name == "lines" else None,
    )
    f: dict = {"step_us": 100_000.0}
    step_lines.step_line_facts(f, trace)
    assert f["hot_line"] == 88 and f["hot_line_beside_call"], f
    assert f["hot_line_share_pct"] == pytest.approx(30.0)


def test_a_lines_share_is_the_samples_where_there_are_enough_and_a_batch_line_gets_its_fix() -> (
    None
):
    # word2vec's generate_batch line, 20% of a step without the profiler: the lines phase,
    # which slows the Python it traces and not the native session.run, read 45%; the samples
    # 13% ±5.
    from types import SimpleNamespace

    from profiler.diagnoses import step_lines
    from profiler.model import Frame, LineStat, Sample, Segment, Window
    from profiler.model.records import LinesData

    ms = 1_000_000
    src = "batch_inputs, batch_labels = generate_batch(batch_size, num_skips, skip_window)"
    lines = (LineStat("/w/w2v.py", 115, "<module>", 10, 10 * 45 * ms, src),)
    window = Window("lines", (Segment(0, tuple(i * 100 * ms for i in range(11))),))
    rec = SimpleNamespace(lines=lines, window=window, data=LinesData(10, ("<module>",)))
    main = (Frame("<module>", "/w/w2v.py", 115),)
    run = (Frame("<module>", "/w/w2v.py", 118), Frame("run", "/site/session.py", 900))
    samples = [Sample((*main, Frame("generate_batch", "/w/w2v.py", 54)), 30, "main")]
    samples += [Sample(run, 120, "main"), Sample(main, 500, "EventLoggerThread 9")]
    sampled = SimpleNamespace(samples=samples)
    phases = {"lines": rec, "sampled": sampled}
    trace = SimpleNamespace(
        script={"path": "/w/w2v.py", "detection": {"source": "session_run"}},
        phase=phases.get,
    )
    f: dict = {"step_us": 1_000.0}
    step_lines.step_line_facts(f, trace)
    assert f["hot_line_share_pct"] == pytest.approx(20.0)  # 30 of 150 main-thread samples
    assert f["hot_line_us"] == pytest.approx(200.0)
    assert f["hot_line_how"].startswith("30 of 150 samples in the steps, ±6 points")
    assert "the lines phase read 45%" in f["hot_line_how"]
    assert f["hot_line_fix"].startswith("It makes the step's batch in Python")
    # Too few samples: the lines phase's share stands.
    sampled.samples = [Sample(run, 60, "main"), samples[0]]
    g: dict = {"step_us": 1_000.0}
    step_lines.step_line_facts(g, trace)
    assert g["hot_line_share_pct"] == pytest.approx(45.0)
    assert g["hot_line_how"].startswith("the lines phase, its steps 100,000 µs on average")


def test_a_line_whose_samples_the_typical_step_cannot_hold_is_named_as_a_few_long_calls() -> None:
    # CS20's logistic regression: next_batch, 3.4 µs a call, copies its whole 172 MB training
    # set at each epoch's end (37-700 ms once in 429 steps). The samples put it at 36% "of
    # each step, 307 µs of the 861 µs step", where the typical step had 11 µs of the script's
    # own Python between the session.run calls (measured without the profiler: 8-11% of the
    # mean step, 3.4 µs of the median one).
    from types import SimpleNamespace

    from profiler.diagnoses import performance, step_lines
    from profiler.model import Frame, LineStat, Sample, Segment, Window
    from profiler.model.records import LinesData

    us = 1_000
    src = "X_batch, Y_batch = mnist.train.next_batch(batch_size)"
    lines = (LineStat("/w/cs20.py", 101, "<module>", 10, 10 * 300 * us, src),)
    window = Window("lines", (Segment(0, tuple(i * 1000 * us for i in range(11))),))
    rec = SimpleNamespace(lines=lines, window=window, data=LinesData(10, ("<module>",)))
    main = (Frame("<module>", "/w/cs20.py", 101), Frame("next_batch", "/w/cs20.py", 40))
    run = (Frame("<module>", "/w/cs20.py", 102), Frame("run", "/site/session.py", 900))
    # 1,000 steps: 999 of 800 µs and one of 400 ms (the epoch's copy).
    ends = [0]
    for d in [800 * us] * 999 + [400_000 * us]:
        ends.append(ends[-1] + d)
    sampled = SimpleNamespace(
        samples=[Sample(main, 75, "main"), Sample(run, 135, "main")],
        window=Window("sampled", (Segment(0, tuple(ends)),)),
    )
    phases = {"lines": rec, "sampled": sampled}
    trace = SimpleNamespace(
        script={"path": "/w/cs20.py", "detection": {"source": "session_run"}},
        phase=phases.get,
    )
    f: dict = {"step_us": 861.0, "script_python_us": 11.0, "overhead_us": 460.0}
    step_lines.step_line_facts(f, trace)
    assert f["hot_line_rare"] and f["hot_line_share_pct"] == pytest.approx(100 * 75 / 210)
    mean_factor = (999 * 800 + 400_000) / 1000 / 800  # no timed window: the samples' figure
    assert f["hot_line_us"] == pytest.approx(861 * 75 / 210 * mean_factor)
    assert f["hot_line_holds"] == (
        "36% of the time in the steps, in a few long calls: a typical 861 µs step has 11 µs of "
        "the script's own Python between the session.run calls"
    )
    assert f["hot_line_fix"].startswith("Find what it does once in a while")
    assert f["hot_line_fix"].endswith(
        "its time comes in a few long calls (the slow steps), not in every step"
    )
    # A timed window whose one slow step (37 ms in 500 of 860 µs) adds less: its figure.
    timed_ends = [0]
    for d in [860 * us] * 499 + [37_000 * us]:
        timed_ends.append(timed_ends[-1] + d)
    phases["timed"] = SimpleNamespace(window=Window("timed", (Segment(0, tuple(timed_ends)),)))
    t: dict = {"step_us": 861.0, "script_python_us": 11.0}
    step_lines.step_line_facts(t, trace)
    assert t["hot_line_us"] == pytest.approx((37_000 - 860) / 500)
    assert t["hot_line_holds"].endswith(
        "; the timed window's slow steps add 72 µs to its mean step"
    )
    # A timed window without any of its long calls: the samples' figure, said so.
    phases["timed"] = SimpleNamespace(
        window=Window("timed", (Segment(0, tuple(i * 860 * us for i in range(501))),))
    )
    e: dict = {"step_us": 861.0, "script_python_us": 11.0}
    step_lines.step_line_facts(e, trace)
    assert e["hot_line_us"] == pytest.approx(f["hot_line_us"])
    assert e["hot_line_holds"].endswith(
        f"; the timed window had none of its long calls, the sampled one {f['hot_line_us']:,.0f} "
        "µs a step"
    )
    del phases["timed"]
    # The session's overhead is not given to that line.
    performance._call_overhead_facts(f)
    assert f["session_overhead_us"] == 460.0
    # The same samples where the typical step's Python can hold them: a line of every step.
    g: dict = {"step_us": 861.0, "script_python_us": 300.0}
    step_lines.step_line_facts(g, trace)
    assert not g["hot_line_rare"] and g["hot_line_holds"].endswith("of the 861 µs step")
    # The same few long calls in a TF2 loop's summary line (the writer flushing its queue): the
    # summaries' fix, and no session.run (it read "between the session.run calls" and "shuffle
    # an index array").
    summary = "tf.summary.scalar('loss', loss, step=step)"
    rec.lines = (LineStat("/w/cs20.py", 101, "<module>", 10, 10 * 300 * us, summary),)
    trace.script = {"path": "/w/cs20.py", "detection": {"source": "tf_function"}}
    h: dict = {"step_us": 861.0, "script_python_us": 11.0, "framework": "tf2"}
    step_lines.step_line_facts(h, trace)
    assert h["hot_line_rare"] and "beside the step's framework calls" in h["hot_line_holds"]
    assert h["hot_line_fix"].startswith("Write the summaries or logs every N steps")


def test_session_runs_overhead_leaves_out_the_scripts_own_python_between_the_calls() -> None:
    from profiler.diagnoses import performance

    f: dict = {"overhead_us": 600.0, "hot_line_us": 200.0, "hot_line": 115, "step_us": 1000.0}
    f.update(hot_line_beside_call=True, hot_line_share_pct=20.0, script_python_us=300.0)
    performance._call_overhead_facts(f)
    assert f["session_overhead_us"] == 300.0
    assert f["session_overhead_note"] == (
        ": 300 µs of it is the script's own Python between the calls, line 115 among it "
        "(below); the rest, 300 µs, is session.run's per-call machinery"
    )
    # No line named: the hooks' Python outside session.run, from a tenth of the step.
    g: dict = {"overhead_us": 600.0, "step_us": 1000.0, "script_python_us": 150.0}
    performance._call_overhead_facts(g)
    assert g["session_overhead_us"] == 450.0
    assert g["session_overhead_note"].startswith(": 150 µs of it is the script's own Python")
    h: dict = {"overhead_us": 600.0, "step_us": 1000.0, "script_python_us": 50.0}
    performance._call_overhead_facts(h)
    assert h["session_overhead_us"] == 600.0
    assert h["session_overhead_note"] == ": the rest is session.run's per-call machinery"


def test_a_loops_line_that_grows_an_array_or_sums_its_weights_is_named_not_the_math() -> None:
    from profiler.diagnoses import step_lines

    # A loop's body is the step's work: only lines beside the training's arithmetic are named
    # (a weight history np.vstack'd every step, 90% of a loop; random.choices(weights=...)
    # summing 497 weights at every call, 43%: both unnamed before, measured without the
    # profiler).
    grows = "w_history = np.vstack([w_history, w])"
    draws = "negs = [ix[w] for w in random.choices(noise_words, weights=noise_p, k=neg)]"
    for source in (grows, draws, "losses = np.append(losses, loss)", "print(step, loss)"):
        assert step_lines._beside_the_math(source), source
    for source in ("h = np.vstack([x, h2])", "w = w - lr * grad_w", "random.choices(a, k=5)"):
        assert not step_lines._beside_the_math(source), source
    assert "append to a Python list and make the array once after the loop" in (
        step_lines._fix("<module>", grows)
    )
    assert "random.choices(..., cum_weights=cum)" in step_lines._fix("<module>", draws)


def test_a_loops_builtin_sum_of_an_array_is_named_with_np_sum() -> None:
    from profiler.diagnoses import step_lines

    # Andrew Ng's logistic regression exercise as its numpy ports write it: cost = 1 / m *
    # sum(error) over 20,000 rows, 6.5-7.3 ms of each iteration (0.76 ms with np.sum),
    # measured without the profiler; it read "dispatch 43%" and no finding.
    for source in ("cost = 1 / m * sum(error)", "m = max(np.abs(g))", "t = sum(theta ** 2)"):
        assert step_lines._beside_the_math(source), source
    for source in (
        "x = np.sum(a)",
        "y = a.sum()",
        "best = max(best, acc)",
        "s = sum(x * y for x in z)",
        "total = sum([a, b])",
        "u = np.cumsum(x)",
    ):
        assert not step_lines._beside_the_math(source), source
    fix = step_lines._fix("costFunctionReg", "cost = 1 / m * sum(error)")
    assert fix.startswith("Python's built-in sum() goes through an array one element")
    assert "use np.sum(...) or the array's .sum()" in fix


def test_a_loops_whole_container_made_an_array_or_its_checkpoint_is_named() -> None:
    from profiler.diagnoses import loops, step_lines

    # A softmax regression converting its 20,000-sample list at every batch (93-98% of its
    # loop without the profiler) read "the arrays are too small for numpy to pay off"; an
    # MLP pickling its weights after every step (15-44%) was not named at all.
    convert = "X_all = np.array(samples)                 # whole dataset, every batch"
    labels = "y_all = np.append([], labels).astype(int)"
    dump, opened = "pickle.dump(params, f)", 'with open("ckpt/model.pkl", "wb") as f:'
    for source in (convert, labels, dump, opened, "np.save('w.npy', W)", "model.save(path)"):
        assert step_lines._beside_the_math(source), source
    for source in ("xb = np.array(X[idx])", "h = np.stack([a, b])", "s = np.asarray(x) @ W"):
        assert not step_lines._beside_the_math(source), source
    assert "convert it once before the loop" in step_lines._fix("<module>", convert)
    assert step_lines._fix("<module>", dump).startswith("It saves at every step")
    # That line's native work is not numpy's per-call cost.
    f = {"framework": "numpy", "step_us": 14_511.0, "dispatch_us": 9_806.6}
    f.update(compute_us=3_975.6, python_us=728.9)
    assert loops._numpy_per_call(f)
    assert not loops._numpy_per_call({**f, "hot_line_share_pct": 88.0})


def _loop_trace(path: str, lines: tuple, steps: int, step_ns: int) -> Any:
    """A loop found by the automatic step whose lines phase timed ``lines`` over ``steps``
    steps of ``step_ns``."""
    from types import SimpleNamespace

    from profiler.model import Segment, Window
    from profiler.model.records import LinesData

    window = Window("lines", (Segment(0, tuple(i * step_ns for i in range(steps + 1))),))
    rec = SimpleNamespace(lines=lines, window=window, data=LinesData(steps, ("<module>",)))
    return SimpleNamespace(
        script={"path": path, "detection": {"source": "auto_loop"}}, phase={"lines": rec}.get
    )


def test_a_loops_checkpoint_lines_are_named_together() -> None:

    from profiler.diagnoses import step_lines
    from profiler.model import LineStat

    # The lines phase of the MLP pickling its weights each step: the math's lines 15-19%
    # each, the file's open 9.7% and the dump 11.6%: together the checkpoint's share.
    ms = 1_000_000
    f_ = "/w/mlp.py"
    lines = (
        LineStat(f_, 27, "<module>", 7, 7 * 17 * ms, "dh1 = (dh2 @ params['W2'].T) * (h1 > 0)"),
        LineStat(f_, 33, "<module>", 14, 7 * 9 * ms, 'with open("ckpt/model.pkl", "wb") as f:'),
        LineStat(f_, 34, "<module>", 7, 7 * 11 * ms, "pickle.dump(params, f)"),
    )
    trace = _loop_trace(f_, lines, 7, 90 * ms)
    f: dict = {"step_us": 90_000.0}
    step_lines.step_line_facts(f, trace)
    assert f["hot_line_where"].startswith("lines 33 and 34 of <module>")
    assert f["hot_line_share_pct"] == pytest.approx(100 * 20 / 90)
    assert f["hot_line_fix"].startswith("It saves at every step")


def test_an_evaluation_on_whole_data_each_step_is_named_though_it_calls_the_steps_functions():
    from profiler.diagnoses import step_lines
    from profiler.model import LineStat

    # A softmax regression logging its loss on all 60,000 rows every step (93% of its loop
    # without the profiler, read "compute 93%, float32"): full_loss() is one of the functions
    # the loop's body calls, taken as the step's, and its line was left out.
    ms = 1_000_000
    f_ = "/w/s5.py"
    lines = (
        LineStat(f_, 36, "<module>", 7, 7 * 1 * ms, "p = softmax(xb @ W + b)"),
        LineStat(f_, 45, "<module>", 7, 7 * 84 * ms, "train_loss, train_acc = full_loss()"),
        LineStat(f_, 46, "<module>", 7, 7 * ms // 100, "t_full += time.perf_counter() - tf_"),
    )
    trace = _loop_trace(f_, lines, 7, 90 * ms)
    trace.script["auto_step"] = {"calls": ["softmax", "full_loss"]}
    f: dict = {"step_us": 90_000.0}
    step_lines.step_line_facts(f, trace)
    assert f["hot_line"] == 45
    assert f["hot_line_where"].startswith("line 45 of <module> (`train_loss, train_acc = full")
    assert f["hot_line_fix"].startswith("It evaluates on held-out or whole data at every step")
    # A validation with the training's own forward pass: named too; the step's own call not.
    val = LineStat(f_, 59, "<module>", 7, 7 * 50 * ms, "_, _, s_val = forward(params, X_val)")
    trace = _loop_trace(f_, (lines[0], val), 7, 90 * ms)
    trace.script["auto_step"] = {"calls": ["forward"]}
    g: dict = {"step_us": 90_000.0}
    step_lines.step_line_facts(g, trace)
    assert g["hot_line"] == 59
    train = LineStat(f_, 50, "<module>", 7, 7 * 50 * ms, "_, _, s = forward(params, xb)")
    trace = _loop_trace(f_, (lines[0], train), 7, 90 * ms)
    trace.script["auto_step"] = {"calls": ["forward"]}
    h: dict = {"step_us": 90_000.0}
    step_lines.step_line_facts(h, trace)
    assert h.get("hot_line") != 50


def test_a_steps_logging_lines_each_under_the_share_are_named_together() -> None:
    # A custom loop's two tf.summary.scalar calls and a print of .numpy() values each step:
    # 12%, 17% and 9% of the lines window's step, 57-62% of the loop without the profiler;
    # each under the finding's 20%, none was named.
    from types import SimpleNamespace

    from profiler.diagnoses import step_lines
    from profiler.model import Frame, LineStat, Sample, Segment, Window
    from profiler.model.records import LinesData

    ms = 1_000_000
    f_ = "/w/loop.py"
    lines = (
        LineStat(f_, 36, "<module>", 10, 10 * 25 * ms, "loss = train_step(xb, yb)"),
        LineStat(f_, 39, "<module>", 10, 10 * 12 * ms, 'tf.summary.scalar("loss", loss)'),
        LineStat(f_, 40, "<module>", 10, 10 * 17 * ms, 'tf.summary.scalar("acc", acc)'),
        LineStat(f_, 42, "<module>", 10, 10 * 9 * ms, 'print(f"{loss.numpy():.4f}")'),
    )
    window = Window("lines", (Segment(0, tuple(i * 100 * ms for i in range(11))),))
    rec = SimpleNamespace(lines=lines, window=window, data=LinesData(10, ("<module>",)))
    main = [Sample((Frame("<module>", f_, n),), c, "main") for n, c in ((36, 60), (39, 30))]
    main += [Sample((Frame("<module>", f_, n),), c, "main") for n, c in ((40, 40), (42, 20))]
    sampled = SimpleNamespace(samples=main)
    trace = SimpleNamespace(
        script={"path": f_, "detection": {"source": "auto_loop"}},
        phase={"lines": rec, "sampled": sampled}.get,
    )
    f: dict = {"step_us": 2_000.0}
    step_lines.step_line_facts(f, trace)
    assert f["hot_line_where"] == (
        'lines 39, 40 and 42 of <module> (`tf.summary.scalar("loss", loss)`; '
        '`tf.summary.scalar("acc", acc)`; `print(f"{loss.numpy():.4f}")`) hold'
    )
    assert f["hot_line_share_pct"] == pytest.approx(60.0)  # 90 of the 150 samples
    assert f["hot_line_fix"].startswith("Log, print or update the progress bar every N steps")
    # The hooks timed 58% of the step in the script's Python outside the tf.function call,
    # the samples fewer: the hooks' figure, bounded by the lines phase's (38% of its step).
    h: dict = {"step_us": 2_000.0, "framework": "tf2", "script_python_us": 1_160.0}
    sampled.samples = [*main[:1], Sample((Frame("<module>", f_, 39),), 5, "main")]
    sampled.samples += [Sample((Frame("run", "/site/x.py", 1),), 100, "main")]
    step_lines.step_line_facts(h, trace)
    assert h["hot_line_share_pct"] == pytest.approx(38.0)  # the lines phase bounds it
    assert h["hot_line_how"].startswith("the hooks timed 58% of the step in the script's own")
    # One logging line alone over the others: named alone.
    g: dict = {"step_us": 2_000.0}
    trace.phase = {"lines": SimpleNamespace(**{**vars(rec), "lines": lines[:2]})}.get
    step_lines.step_line_facts(g, trace)
    assert g["hot_line_where"].startswith("line 39 of <module>")


if __name__ == "__main__":
    record()


def test_a_training_call_is_not_an_evaluation_by_the_name_it_assigns() -> None:
    # A TF1 loop's `_, loss_val = sess.run([train_op, loss])` read as an evaluation by its
    # target's name, and its step, all of it, "100% of the time in the steps, in a few long
    # calls": told to find a shuffle or a save it never made.
    from profiler.diagnoses.step_lines import EVAL_LINE, _called

    assert not EVAL_LINE.search(_called("_, loss_val = sess.run([train_op, loss])"))
    assert EVAL_LINE.search(_called("val_loss = sess.run(loss, feed_dict={x: x_val})"))
    assert EVAL_LINE.search(_called("score = model.evaluate(x, y)"))
    assert _called("print(a == b)") == "print(a == b)"

"""The diagnosis engine: rules fire on their condition, stay silent without their facts."""

from __future__ import annotations

import pytest

from profiler.diagnoses.engine import STRICT_ENV, Rule, evaluate
from profiler.model import PhaseRecord, Segment, Window, WorkDecl, WorkloadTrace

RULE = Rule(
    id="slow",
    subject="workload",
    needs=("name", "step_us", "share"),
    when=lambda f: f["share"] > 0.5,
    message="{name}: {step_us:.0f} µs/step, {share:.0%} overhead",
    fix="do less per step",
)


def test_rule_fires_with_numbers_from_the_facts():
    (d,) = evaluate([RULE], "workload", [{"name": "a", "step_us": 190.4, "share": 0.84}])
    assert d.message == "a: 190 µs/step, 84% overhead"
    assert d.fix == "do less per step"
    assert d.to_json()["rule"] == "slow"


def test_rule_is_silent_below_its_condition_without_facts_or_for_another_subject():
    assert evaluate([RULE], "workload", [{"name": "a", "step_us": 10.0, "share": 0.2}]) == []
    assert evaluate([RULE], "workload", [{"name": "a", "step_us": None, "share": 0.9}]) == []
    assert evaluate([RULE], "workload", [{"name": "a", "share": 0.9}]) == []
    assert evaluate([RULE], "pair", [{"name": "a", "step_us": 1.0, "share": 0.9}]) == []


def test_a_rule_that_raises_costs_its_finding_not_the_others(monkeypatch, capsys):
    broken = Rule(
        id="broken",
        subject="workload",
        needs=("name",),
        when=lambda f: f["absent"] > 0,
        message="never",
        fix="",
    )
    facts = [{"name": "a", "step_us": 190.4, "share": 0.84}]
    monkeypatch.setenv(STRICT_ENV, "")
    (d,) = evaluate([broken, RULE], "workload", facts)
    assert d.rule == "slow"
    err = capsys.readouterr().err.strip()
    assert err.startswith("profiler: a finding on a could not be worked out (KeyError at ")
    assert err.endswith("it is left out, the measurements are kept") and "\n" not in err
    monkeypatch.setenv(STRICT_ENV, "1")  # the test suite's setting: the error ends the run
    with pytest.raises(KeyError):
        evaluate([broken, RULE], "workload", facts)


def test_a_template_may_only_use_declared_facts():
    with pytest.raises(ValueError, match="'typed' is not in needs"):
        Rule("bad", "workload", ("name",), lambda f: True, "{name} {typed}")


class _Warmup:
    n_steps = 10


class _Trace:
    warmup = _Warmup()

    def __init__(self, functions: list[dict], steps: int = 110) -> None:
        self.script = {"steps": steps, "functions": functions}


def _tracing(functions: list[dict], steps: int = 110) -> dict[str, object]:
    """The tracing findings on a step that spends 30% of its 100 µs tracing."""
    from profiler.diagnoses import performance

    f: dict[str, object] = {"label": "s.py", "name": "s.py", "tracing_us": 30.0}
    f.update(tracing_pct=30.0, uses_function=True, ops_per_step=None)
    performance._retrace_facts(f, _Trace(functions, steps))
    found = evaluate(performance.RULES, "workload", [f])
    return {d.rule: d for d in found if "tracing" in d.rule}


def test_tracing_whose_interval_reaches_zero_gets_no_generic_finding():
    # A fit compiled with run_eagerly=True read "242 µs per steady-state step (1.1%) goes to
    # tracing or retracing ... give tf.function a stable input signature" from a share of
    # 1% ±2: not shown to be there.
    from profiler.diagnoses import performance

    f: dict[str, object] = {"label": "s.py", "name": "s.py", "tracing_us": 242.0}
    f.update(tracing_pct=1.1, uses_function=True, ops_per_step=None, tracing_low_pct=0.0)
    found = {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    assert not {"steady_tracing", "library_tracing"} & found, found
    f["tracing_low_pct"] = 0.4
    found = {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    assert "steady_tracing" in found, found


def test_signature_advice_only_for_a_function_the_script_defines():
    keras = {"name": "TensorFlowTrainer.make_predict_function.<locals>.one_step_on_data"}
    keras.update(module="keras.src.backend.tensorflow.trainer", own=False, calls=100)
    keras.update(trace_steps=[20, 30, 40], changed={})
    found = _tracing([keras])
    assert set(found) == {"library_tracing"}
    d = found["library_tracing"]
    assert "one_step_on_data (in keras.src.backend.tensorflow.trainer)" in d.message
    assert "which the script does not define: it traced 3 times in 100 steady-state" in d.message
    assert "input_signature" not in d.fix and "not the script's to change" in d.fix
    # No function traced again after the warm-up: the tracing the samples saw was a first
    # trace inside the windows (a first validation's), once: no advice.
    quiet = {**keras, "trace_steps": [1]}
    once = _tracing([quiet, {**own_fn(), "trace_steps": [2]}])
    assert set(once) == {"one_off_tracing"} and once["one_off_tracing"].cost_us is None
    assert once["one_off_tracing"].fix.startswith(
        "Nothing to change in the loop: a trace is paid once"
    )
    assert "traced for the first time inside the measured steps" in found_msg(once)
    # The script's own function retraced on a Python int: the retracing finding, with the arg.
    own = {"name": "train_step", "module": "__main__", "own": True, "calls": 100}
    own.update(trace_steps=[11, 12, 13, 14], changed={"step": {"times": 4, "what": "a Python int"}})
    found = _tracing([own, keras])
    assert set(found) == {"retracing"}
    assert "Pass step as a tensor" in found["retracing"].fix
    # Retracing on a tensor (its shape changes): a signature absorbs it; "pass it as a
    # tensor" cannot help.
    shapes = {**own, "changed": {"x": {"times": 4, "what": "a tensor"}}}
    found = _tracing([shapes])
    assert set(found) == {"retracing"}
    assert "Pass" not in found["retracing"].fix
    assert "input_signature with None for the dimension of x" in found["retracing"].fix
    # One more trace in 1,545 steps (a tf.data loop's last partial batch, seen on the
    # TensorBoard guide's loop): a one-off, no retracing finding and no cost to lead with.
    partial = {**shapes, "trace_steps": [300]}
    found = _tracing([partial], steps=1555)
    assert set(found) == {"one_off_tracing"} and found["one_off_tracing"].cost_us is None
    msg = found["one_off_tracing"].message
    assert "train_step traced 1 more time after the warm-up, in 1,545 steps: x (a tensor)" in msg
    # Four in 100 steps is retracing (above): the few are at most 3 and under 1 in 100 steps.
    assert set(_tracing([{**shapes, "trace_steps": [20, 40, 60]}])) == {"retracing"}
    # A record written before functions had an origin counts as the script's own.
    old = {k: v for k, v in own.items() if k not in ("module", "own")}
    assert set(_tracing([old])) == {"retracing"}
    # A function none of whose calls were steps (TF's text generation tutorial's
    # generate_one_step after fit's batches, retraced as its states went from None to a
    # tensor): its traces are not the steps', no retracing finding.
    after = {**shapes, "name": "OneStep.generate_one_step", "outside_calls": 100}
    assert "retracing" not in _tracing([after])
    assert set(_tracing([{**after, "outside_calls": 99}])) == {"retracing"}


def own_fn() -> dict:
    return {"name": "train_step", "module": "__main__", "own": True, "calls": 100}


def found_msg(found: dict) -> str:
    return " ".join(d.message for d in found.values())


def test_epochs_of_one_batch_are_named_and_get_no_per_batch_advice():
    from profiler.diagnoses import performance

    f = {"label": "s.py", "name": "s.py", "framework": "keras", "step_us": 275_000.0}
    f.update(overhead_pct=98.0, overhead_us=270_000.0, compute_us=5.0, units_per_step=1)
    f.update(tracing_pct=0.0, flops=None, uses_function=True)
    many = {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    assert "overhead_bound_keras" in many and "one_batch_epochs" not in many
    f["one_batch_epochs"] = 500
    found = {d.rule: d for d in evaluate(performance.RULES, "workload", [f])}
    assert "overhead_bound_keras" not in found
    d = found["one_batch_epochs"]
    assert "each of the 500 epochs of fit is one batch" in d.message
    assert "fewer epochs" in d.fix and "steps_per_execution cannot help" in d.fix


def test_numpy_per_call_cost_counts_the_python_around_the_calls_against_the_arithmetic() -> None:
    from profiler.diagnoses import loops

    def fired(compute: float, dispatch: float, python: float) -> bool:
        f = {
            "label": "gd.py",
            "framework": "numpy",
            "step_us": 10.0,
            "inner_line": None,
            "numpy_where": "",
        }
        f.update(compute_us=compute, dispatch_us=dispatch, python_us=python)
        return "numpy_per_call" in {d.rule for d in evaluate(loops.RULES, "workload", [f])}

    # CI beside the other test worker read a 256-row gradient-descent step 30% compute, 45%
    # dispatch, 25% Python (its arithmetic is 17-22% without the profiler).
    assert fired(3.0, 4.5, 2.5)
    # Arithmetic at a third or more of the step: the arrays are large enough.
    assert not fired(3.5, 4.5, 2.0)
    # Mostly the interpreter, numpy's own cost under its arithmetic: not numpy's per-call cost.
    assert not fired(3.0, 2.0, 5.0)
    # numpy's own cost under 40% of the step.
    assert not fired(1.0, 3.5, 5.5)


def test_the_line_that_runs_once_a_period_is_named_in_the_periodic_finding() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance
    from profiler.model import LineStat

    f = "/home/u/train.py"
    lines = (
        LineStat(f, 79, "train", 288, 288 * 3_900_000, "loss = train_step(net, example, opt)"),
        LineStat(f, 82, "train", 288, 288 * 200_000, "if int(ckpt.step) % 10 == 0 and save:"),
        LineStat(f, 84, "train", 29, 29 * 36_600_000, "save_path = manager.save()"),
        LineStat(f, 85, "train", 29, 29 * 500_000, "print(save_path)"),
        LineStat("/v/site-packages/k.py", 9, "f", 29, 29 * 90_000_000, "x"),
    )
    rec = SimpleNamespace(lines=lines, data=SimpleNamespace(steps_profiled=288))
    trace = SimpleNamespace(phase=lambda name: rec if name == "lines" else None)
    said = performance._slow_line(trace, 10, 35_000_000)
    assert said == (
        "Line 84 (`save_path = manager.save()`) runs 29 times in 288 steps, 36.6 ms each time "
        "(the lines phase)"
    )
    # Another period, or an excess the line cannot hold: not named.
    assert performance._slow_line(trace, 50, 35_000_000) == ""
    assert performance._slow_line(trace, 10, 200_000_000) == ""


def test_a_fit_called_once_an_iteration_is_told_of_its_calls_not_its_epochs() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    epochs = SimpleNamespace(
        excess_ns=311_000_000, share=0.97, low_share=0.9, steps_per_epoch=4, boundaries=10, clean=3
    )
    wa = SimpleNamespace(epochs=epochs)
    fit = {"epochs": 1, "calls": 60, "callbacks": [], "validation": False}
    f: dict = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), wa)
    assert f["epoch_unit"] == "fit call"
    assert f["epoch_fix"].startswith("call fit once for the loop's 60 iterations (fit(epochs=60)")
    assert "steps_per_epoch" not in f["epoch_fix"]
    # A compile before each fit call (a learning rate changed by recompiling: ~75% of the loop
    # without the profiler, read "each of the 25 fit calls' set-up"): the compiles named, and
    # compiling once first.
    compiled = {"compile": {"calls": 60, "ms": 900.0, "samples": 0, "sized": 0}}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit, "keras_calls": compiled}), wa)
    assert f["epoch_work"].startswith("a model.compile before each of the 60 fit calls (60 in all")
    assert f["epoch_fix"].startswith("compile once, before the loop: to change the learning rate")
    # Its new train functions, each traced once: not "no tf.function traced again".
    fns = [{"name": "multi_step_on_iterator", "own": False, "trace_steps": [0]}]
    g: dict = {}
    performance._retrace_facts(
        g,
        SimpleNamespace(
            warmup=SimpleNamespace(n_steps=10),
            script={"steps": 240, "functions": fns, "keras_calls": compiled},
        ),
    )
    assert g["one_off_what"].startswith("model.compile ran 60 times")
    # One fit of many epochs: its epochs are the boundaries.
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": {**fit, "calls": 1}}), wa)
    assert f["epoch_unit"] == "epoch" and "steps_per_epoch larger than 4" in f["epoch_fix"]
    # Each fit call followed by model.evaluate on 512 rows (144 ms of each 153 ms boundary; 44%
    # of the loop without the profiler, the fit calls' own set-up 28%): both named.
    calls = {"evaluate": {"calls": 60, "ms": 8633.0, "samples": 30720, "sized": 60}}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit, "keras_calls": calls}), wa)
    assert f["epoch_work"] == (
        "model.evaluate, called 60 times (144 ms a call, timed) and each of the 60 fit calls' "
        "set-up (its data adapter, iterator and callbacks)"
    )
    assert f["epoch_fix"].startswith("validate inside fit (validation_data=..., validation_freq")
    # TensorBoard's histograms every epoch (the tutorial's histogram_freq=1, 56% of a small
    # fit's loop without the profiler; "TensorBoard: update_freq, profile_batch=0" was said
    # where profile_batch=0 was set): the setting named.
    board = {**fit, "calls": 1, "callbacks": ["TensorBoard"], "histogram_freq": 1}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": board}), wa)
    assert f["epoch_fix"].startswith(
        "TensorBoard(histogram_freq=1) writes a histogram of every weight at each epoch: "
        "histogram_freq=0, or a larger one"
    )
    assert "profile_batch" not in f["epoch_fix"]
    # Validation watched by EarlyStopping: fewer batches first, and what validation_freq does
    # to its patience.
    watched = {**fit, "calls": 1, "callbacks": ["EarlyStopping", "ReduceLROnPlateau"]}
    f = {}
    performance._epoch_facts(
        f, SimpleNamespace(script={"fit": {**watched, "validation": True}}), wa
    )
    assert f["epoch_fix"].startswith(
        "validate on fewer batches (validation_steps), or less often (fit(validation_freq=k)) "
        "with EarlyStopping and ReduceLROnPlateau's patience counted in validations"
    )
    assert "epoch-end callbacks cheaper" not in f["epoch_fix"]
    # A checkpoint each epoch beside a CSVLogger (28-39 ms and 0.07 ms an epoch without the
    # profiler): the checkpoint's setting named, not TensorBoard's nor the logger.
    saving = {**fit, "calls": 1, "callbacks": ["ModelCheckpoint", "CSVLogger"]}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": saving}), wa)
    assert (
        "make the epoch-end callbacks cheaper (ModelCheckpoint: every few epochs"
        in (f["epoch_fix"])
    )
    assert "TensorBoard" not in f["epoch_fix"] and "CSVLogger" not in f["epoch_fix"]
    # A TensorBoard at Keras 3's defaults writes each epoch's scalars only: nothing to set
    # (word2vec's fit was told "update_freq='epoch', profile_batch=0", its defaults; without
    # it the fit was 0.01 s faster of 1.35 s); one set to write more is told what.
    default = {"tb_update_freq": "epoch", "tb_profiling": False, "tb_write_images": False}
    plain = {**fit, "calls": 1, "callbacks": ["TensorBoard"], **default}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": plain}), wa)
    assert "TensorBoard" not in f["epoch_fix"], f["epoch_fix"]
    busy = {**plain, "tb_update_freq": 1, "tb_profiling": True}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": busy}), wa)
    assert (
        "make the epoch-end callbacks cheaper (TensorBoard: update_freq='epoch' (it writes "
        "every 1 batches), profile_batch=0 (it profiles batches))" in f["epoch_fix"]
    )
    # The dataset's batch is the fit's own (an autoencoder's batch_size=128 read .batch(32)).
    arrays = {**fit, "calls": 1, "x_kind": "arrays", "batch_size": 128}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": arrays}), wa)
    assert ".shuffle(len(x)).batch(128).prefetch" in f["epoch_fix"]
    # Called once in all: not the boundaries'.
    calls = {"evaluate": {"calls": 1, "ms": 300.0, "samples": 512, "sized": 1}}
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit, "keras_calls": calls}), wa)
    assert "evaluate" not in f["epoch_work"] and "evaluate" not in f["epoch_fix"]


def test_a_fit_on_arrays_is_told_to_build_its_dataset_once_and_its_validation_is_split_out() -> (
    None
):
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    # A tabular fit (TensorFlow's regression tutorial's kind): 8-batch epochs from numpy
    # arrays with validation_split, 75-150 ms an epoch from arrays, 18-29 ms from a tf.data set
    # built once, measured without the profiler; its boundaries 176 ms beyond a 2.3 ms batch.
    epochs = SimpleNamespace(
        excess_ns=175_700_000,
        share=0.9,
        low_share=0.85,
        steps_per_epoch=8,
        boundaries=95,
        batch_ns=2_300_000,
        clean=4,
    )
    wa = SimpleNamespace(epochs=epochs)
    fit = {
        "epochs": 100,
        "calls": 1,
        "callbacks": [],
        "validation": True,
        "validation_freq": 1,
        "x_kind": "arrays",
        "validation_kind": "arrays",
        "steps_per_epoch": 8,
        # The first traces the test function; the third ran while a phase altered the loop.
        "validations_ns": [400_000_000, 90_000_000, 900_000_000, 110_000_000],
        "validations_altered": [2],
    }
    f: dict = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), wa)
    assert f["epoch_fix"].startswith("validate less often (fit(validation_freq=k))"), f["epoch_fix"]
    assert (
        "; give fit a tf.data.Dataset built once, before fit (tf.data.Dataset." in (f["epoch_fix"])
    )
    assert "the validation set as one too (split off from the arrays once" in f["epoch_fix"]
    assert "fit(validation_freq=k)" in f["epoch_fix"]
    assert f["epoch_work"] == (
        "validation every epoch and the new iterator fit starts each epoch over the numpy "
        "arrays (a shuffle of their indices and a gather per batch)"
    )
    assert (
        "not measured on this loop: it removes at most the boundary's part beside the "
        "validation, 85,700 µs an epoch)" in f["epoch_fix"]
    )
    # Validation under half the boundary (the regression tutorial's, 28 ms of 115 ms: a
    # dataset built once saved 61% of the fit, validation_freq=10 27%, without the profiler):
    # the dataset's fix first.
    short = {**fit, "validations_ns": [400_000_000, 28_000_000, 900_000_000, 30_000_000]}
    g: dict = {}
    performance._epoch_facts(g, SimpleNamespace(script={"fit": short}), wa)
    assert g["epoch_fix"].startswith("give fit a tf.data.Dataset built once"), g["epoch_fix"]
    assert "; validate less often (fit(validation_freq=k))" in g["epoch_fix"]
    assert (
        "(its validation, timed: 90,000 µs of it; the rest, not timed apart: fit's own epoch "
        "end and the next epoch's set-up)" in (f["epoch_what"])
    )
    # No boundary in the timed window (all in instrumented ones, which slow a validation more
    # than the batches: a 24,000-row validation read 6.0 s a boundary, 2.1 s as written, 2.3 s
    # without the profiler): the validations timed as written give the cost.
    f = {}
    from profiler.analysis.stats import EpochCost

    instrumented = EpochCost(8, 95, 175_700_000, 2_300_000, 0.9, 0.85, clean=0)
    wa = SimpleNamespace(epochs=instrumented, attribution=SimpleNamespace(reference_ns=2_300_000))
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), wa)
    assert f["epoch_excess_us"] == 90_000.0 and f["epoch_what"].startswith(
        "every epoch's validation takes 90,000 µs (timed as written; the 95 epoch boundaries "
        "the instrumented windows held read 175,700 µs)"
    ), f["epoch_what"]
    assert f["epoch_boundaries"] == 95  # still the boundaries' count, for the rule's floor
    # A tf.data input: no such fix.
    f = {}
    given = {**fit, "x_kind": "dataset", "validation_kind": "dataset"}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": given}), wa)
    assert "tf.data.Dataset" not in f["epoch_fix"] and "numpy" not in f["epoch_work"]


def test_predict_on_one_batch_a_call_in_a_loop_is_named_with_predict_on_batch() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import calls

    # A GAN's generator.predict on 16 samples, 150 times: 20.7 s of a 46.4 s run.
    script = {
        "wall_s": 46.4,
        "steps": 450,
        "time": {"steps_s": 40.0},
        "keras_calls": {"predict": {"calls": 150, "ms": 20_685.0, "samples": 2400, "sized": 150}},
    }
    f: dict = {"label": "gan.py"}
    calls.call_facts(f, SimpleNamespace(script=script))
    (d,) = evaluate(calls.RULES, "workload", [{**f, "name": "gan.py"}])
    assert d.rule == "predict_in_loop" and "150 times on 16 samples each" in d.message
    assert "use model.predict_on_batch(x) or the model in a tf.function" in d.fix
    # model(x) eagerly is named as what it is, not offered as an equal (a character LSTM's
    # generation: 2.1x slower than predict, measured without the profiler).
    assert "model(x, training=False) builds none either, but it runs eagerly" in d.fix


def test_fit_called_on_one_batch_again_and_again_is_named_with_train_on_batch() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import calls, performance

    # A DQN's replay fitting each of 32 transitions on its own (keon/deep-q-learning): 320 fit
    # calls of one sample, 48 s of a 92.5 s run (68 ms a call against train_on_batch's 1.3 ms,
    # measured without the profiler).
    fit = {"calls": 320, "one_batch_calls": 320, "ns": 48_000_000_000, "epochs": 1}
    script = {"wall_s": 92.5, "steps": 320, "fit": fit}
    f: dict = {"label": "dqn.py", "compute_us": 5_860.0}
    calls.fit_facts(f, SimpleNamespace(script=script))
    (d,) = evaluate(calls.RULES, "workload", [{**f, "name": "dqn.py"}])
    assert d.rule == "fit_per_batch" and "model.fit 320 times on one batch each" in d.message
    assert "48.0 s (150.0 ms a call, of which the batch's kernels 5,860 µs), 52%" in d.message
    assert "model.train_on_batch(x, y)" in d.fix and d.cost_us == 150_000.0 - 5_860.0
    # fit's per-batch machinery is not what steps_per_execution helps here.
    assert calls.fit_per_batch(f)
    # Fits of many batches each, or a few calls: not named.
    for other in ({**fit, "one_batch_calls": 10}, {**fit, "calls": 12, "one_batch_calls": 12}):
        g: dict = {"label": "dqn.py", "compute_us": 5_860.0}
        calls.fit_facts(g, SimpleNamespace(script={**script, "fit": other}))
        assert not evaluate(calls.RULES, "workload", [{**g, "name": "dqn.py"}])
    assert any(r.id == "fit_per_batch" for r in performance.RULES)
    # With each call timed, the median call stands for them all: the instrumented windows
    # slow those they hold (a DQN's 64 calls read 162 ms a call, the mean; 76 ms without the
    # profiler, ranked above its predict calls' larger cost).
    timed = {**fit, "call_ms": [76.0] * 200 + [400.0] * 120}
    g = {"label": "dqn.py", "compute_us": 5_860.0}
    calls.fit_facts(g, SimpleNamespace(script={**script, "fit": timed}))
    (d,) = evaluate(calls.RULES, "workload", [{**g, "name": "dqn.py"}])
    assert "24.3 s (76.0 ms the median call, of which the batch's kernels 5,860 µs), 26%" in (
        d.message
    )
    assert d.cost_us == 76_000.0 - 5_860.0


def test_predict_calls_inside_the_steps_are_not_the_steps_per_call_overhead() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import calls, performance

    # A GAN's predict between its train_on_batch steps (300 steps of 40 ms, 94% overhead read
    # as train_on_batch's per-call cost; predict 58% of the loop without the profiler): the
    # 7.3 s its calls took inside the steps leave the step's overhead, and the one-off
    # tracing finding is not said (each predict builds its dataset's functions again).
    script = {
        "wall_s": 19.9,
        "steps": 300,
        "time": {"steps_s": 13.5},
        "keras_calls": {
            "predict": {
                "calls": 101,
                "ms": 7_300.0,
                "in_steps_ms": 7_300.0,
                "samples": 3_232,
                "sized": 101,
            }
        },
    }
    f: dict = {"label": "gan.py", "step_us": 40_266.0, "overhead_us": 37_720.0}
    f["overhead_pct"] = 100 * f["overhead_us"] / f["step_us"]
    calls.call_facts(f, SimpleNamespace(script=script))
    assert f["overhead_us"] == pytest.approx(37_720.0 - 7_300.0 * 1e3 / 300)
    assert f["overhead_pct"] == pytest.approx(100 * f["overhead_us"] / 40_266.0)
    assert f["overhead_pct"] < performance.OVERHEAD_BOUND_PCT
    (one_off,) = [r for r in performance.RULES if r.id == "one_off_tracing"]
    assert not one_off.when({**f, "tracing_pct": 15.0})
    # The same calls made before the steps began leave the overhead as it was.
    script["keras_calls"]["predict"]["in_steps_ms"] = 0.0
    g: dict = {"label": "gan.py", "step_us": 40_266.0, "overhead_us": 37_720.0}
    calls.call_facts(g, SimpleNamespace(script=script))
    assert g["overhead_us"] == 37_720.0
    assert one_off.when({**g, "tracing_pct": 15.0})


def test_one_epoch_boundary_does_not_hold_back_the_per_batch_finding() -> None:
    from profiler.diagnoses import performance

    f = {"epoch_boundaries": 1, "epoch_cost_per_step_us": 1091.0}
    assert performance._recurring_epoch_cost(f) == 0.0
    assert performance._recurring_epoch_cost({**f, "epoch_boundaries": 3}) == 1091.0


def test_per_epoch_cost_is_held_to_its_smallest_boundary() -> None:
    from profiler.diagnoses import performance

    (rule,) = [r for r in performance.RULES if r.id == "per_epoch_cost"]
    f = {"epoch_share_pct": 11.0, "epoch_low_pct": 6.0, "epoch_boundaries": 3}
    assert not rule.when(f)
    assert rule.when({**f, "epoch_low_pct": 10.5})
    assert not rule.when({**f, "epoch_low_pct": 12.0, "epoch_boundaries": 1})


def test_the_eager_fix_names_the_loop_body_when_the_loop_itself_updates_the_model():
    # TF's "Custom training: walkthrough": the loop calls grad(...) and then
    # optimizer.apply_gradients and the metrics itself; wrapping grad alone leaves them eager
    # (measured: grad in tf.function 1.4x faster, the whole body 5.0x).
    from types import SimpleNamespace

    from profiler.diagnoses.performance import _step_function

    body = {"chosen_line": 40, "calls": ["grad"], "updates": True}
    text = _step_function(SimpleNamespace(script={"auto_step": body}))
    assert text.startswith("the body of the loop at line 40") and "grad" in text
    # handson-ml's loop calls random_batch (numpy) first: "its call of random_batch ...
    # moved into one function" froze the batch at tracing. The batch is an argument.
    first = {"chosen_line": 51, "calls": ["random_batch", "print_status_bar"], "updates": True}
    text = _step_function(SimpleNamespace(script={"auto_step": first}))
    assert "takes the batch as its arguments" in text and "its call of" not in text
    assert (
        "it calls (random_batch, print_status_bar), those doing the step's math go inside" in text
    )
    assert "and those that make the batch in numpy, print, or convert" in text
    fresh = {**body, "fresh_metrics": ["acc", "loss_avg"], "fresh_metrics_line": 35}
    text = _step_function(SimpleNamespace(script={"auto_step": fresh}))
    assert "the metrics it updates (acc, loss_avg) made once, before the loop at line 35" in text
    assert "metrics it updates" not in _step_function(SimpleNamespace(script={"auto_step": body}))
    again = {**body, "second_forward": [44, "model"]}
    text = _step_function(SimpleNamespace(script={"auto_step": again}))
    assert "; line 44 runs model on the batch a second time, beside the forward pass" in text
    only = {"chosen_line": 40, "calls": ["train_step"], "updates": False}
    text = _step_function(SimpleNamespace(script={"auto_step": only}))
    assert text == "train_step (called by the loop at line 40)"


def test_an_eager_step_with_a_third_in_python_and_dispatch_gets_the_tf_function_fix():
    # d2l's eager MLP loop: compute 44%, Python 33%, dispatch 11%; "no fix found" at a 50%
    # floor, where tf.function made it 2.6-3.1x faster (measured without the profiler).
    from profiler.diagnoses import performance

    (rule,) = [r for r in performance.RULES if r.id == "eager_dispatch"]
    f = {"eager": True, "python_dispatch_pct": 44.0, "function_step_saving_us": None}
    assert rule.when(f)
    assert not rule.when({**f, "python_dispatch_pct": 20.0})
    assert not rule.when({**f, "eager": False})


def test_per_call_advice_for_a_library_function_names_it_and_not_a_tf_range_loop():
    """A train_on_batch loop: the steps call Keras's one_step_on_data, which the script does
    not define; a tf.range loop inside it is not the script's to write."""
    from profiler.diagnoses import performance

    keras = {"name": "TensorFlowTrainer._make_function.<locals>.one_step_on_data"}
    keras.update(module="keras.src.backend.tensorflow.trainer", own=False, calls=1565)
    f: dict[str, object] = {"label": "s.py", "name": "s.py", "framework": "tf2"}
    f.update(mode="function", step_us=1156.0, overhead_pct=87.0, overhead_us=1008.0)
    f.update(compute_us=148.0, units_per_step=1, tracing_pct=0.0, flops=None)
    performance._retrace_facts(f, _Trace([keras], steps=1575))
    performance._call_overhead_facts(f)
    found = {d.rule: d for d in evaluate(performance.RULES, "workload", [f])}
    fix = found["overhead_bound_function"].fix
    assert "one_step_on_data (in keras.src.backend.tensorflow.trainer)" in fix
    assert "steps_per_execution=k, instead of train_on_batch" in fix and "tf.range" not in fix
    # The script's own function: the loop inside it.
    own = {**own_fn(), "calls": 1565}
    g = {k: v for k, v in f.items() if k != "function_fix"}
    performance._retrace_facts(g, _Trace([own, {**keras, "calls": 3}], steps=1575))
    found = {d.rule: d for d in evaluate(performance.RULES, "workload", [g])}
    assert "a loop over tf.range(k) inside it" in found["overhead_bound_function"].fix


def test_a_function_steps_overhead_leaves_out_the_lines_beside_it_and_the_input_wait():
    """A train_on_batch loop shuffling its 60,000 rows at every batch (X_train[perm]: 91% of
    the step without the profiler) read "97% ... is the tf.function call's per-call cost"; a
    custom loop's next() on its dataset (23-26%) was counted in that cost too."""
    from profiler.diagnoses import performance

    keras = {"name": "TensorFlowTrainer._make_function.<locals>.one_step_on_data"}
    keras.update(module="keras.src.backend.tensorflow.trainer", own=False, calls=900)
    f: dict[str, object] = {"label": "s.py", "name": "s.py", "framework": "tf2"}
    f.update(mode="function", step_us=66_388.0, overhead_pct=97.0, overhead_us=64_614.0)
    f.update(compute_us=1_774.0, units_per_step=1, tracing_pct=0.0, flops=None)
    f.update(hot_line=31, hot_line_us=61_000.0, hot_line_share_pct=92.0)
    f.update(hot_line_beside_call=True, hot_line_rare=False)
    performance._retrace_facts(f, _Trace([keras], steps=900))
    performance._call_overhead_facts(f)
    assert f["function_overhead_us"] == pytest.approx(3_614.0)
    assert f["function_overhead_note"].startswith(
        ": 61,000 µs of it is the script's own Python between the calls, line 31 among it"
    )
    found = {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    assert "overhead_bound_function" not in found, found
    # A dataset's next() between the calls: said apart, the rest still a finding.
    g: dict[str, object] = {"label": "s.py", "name": "s.py", "framework": "tf2"}
    g.update(mode="function", step_us=2_126.0, overhead_pct=71.0, overhead_us=1_516.0)
    g.update(compute_us=610.0, units_per_step=1, tracing_pct=0.0, flops=None, input_us=500.0)
    performance._retrace_facts(g, _Trace([own_fn()], steps=900))
    performance._call_overhead_facts(g)
    (d,) = [d for d in evaluate(performance.RULES, "workload", [g]) if "overhead" in d.rule]
    assert d.rule == "overhead_bound_function" and d.cost_us == pytest.approx(1_016.0)
    assert "500 µs waiting for input between the calls; the rest, 1,016 µs, is the " in d.message


def _segment(first: int, durations: list[int], t0: int) -> Segment:
    bounds = [t0]
    for d in durations:
        bounds.append(bounds[-1] + d)
    return Segment(first, tuple(bounds))


def _windows_trace(
    steps_per_epoch: int, windows: list[tuple[str, int, list[int]]]
) -> WorkloadTrace:
    """A trace whose phases are ``(name, first step, step durations)``, back to back."""
    t0, phases = 1_000_000, []
    for name, first, durs in windows:
        phases.append(PhaseRecord(name, "ok", window=Window(name, (_segment(first, durs, t0),))))
        t0 += sum(durs)
    return WorkloadTrace(
        workload="w",
        params={},
        work=WorkDecl(32, 1, steps_per_epoch, 0, 0),
        build_ns=0,
        warmup=Window("warmup", (_segment(0, [1_000_000], 0),)),
        phases=tuple(phases),
    )


def test_an_epoch_boundary_in_an_instrumented_window_counts_at_the_timed_steps_speed():
    """Epochs of 10 batches of 1 ms; each boundary carries 2 ms of validation. The timed window
    holds the first boundary (with a one-off 20 ms trace), a window 3x slower holds the next
    three: each counts as 2 ms at the timed window's speed, and the first is left out."""
    from profiler.analysis import stats

    ms = 1_000_000
    timed = [ms] * 10 + [ms + 20 * ms] + [ms] * 9  # steps 0..19; step 10 is a boundary
    slow = ([3 * ms + 6 * ms] + [3 * ms] * 9) * 2 + [3 * ms + 6 * ms]  # steps 20..40
    trace = _windows_trace(10, [("timed", 0, timed), ("hooks", 20, slow)])
    cost = stats.epoch_cost(trace, 10, 0)
    assert cost is not None and cost.boundaries == 3  # steps 20, 30 and 40; step 10 left out
    assert cost.excess_ns == 2 * ms and cost.batch_ns == ms
    assert cost.share == pytest.approx(2 / 12) and cost.low_share == pytest.approx(2 / 12)
    # Measured absolute, the slow window's 6 ms would have read 6 / 16 of an epoch.
    # The same boundaries in the sampled window: py-spy pauses every thread (a validation's
    # tf.data threads too: 0.16 s took 2.8 s there), so they count for nothing.
    paused = _windows_trace(10, [("timed", 0, timed), ("sampled", 20, slow)])
    assert stats.epoch_cost(paused, 10, 0) is None


def test_slow_steps_repeat_across_windows_at_their_own_speed_and_the_sampler_pauses_are_left_out():
    """A 6 ms step every 100th (an epoch's validation) falls once in each window: across the
    timed window, one 2x slower and a third, its period is found, each at the timed window's
    speed; the sampled window's steps (py-spy pauses the process) count for nothing."""
    from profiler.analysis import stats

    ms = 1_000_000

    def steps(first: int, scale: int, slow_at: set[int]) -> list[int]:
        return [scale * (7 * ms if first + i in slow_at else ms) for i in range(100)]

    every = {50, 150, 250, 350}
    paused = [5 * ms if i % 7 == 3 else ms for i in range(100)]  # the sampler's pauses
    windows = [
        ("timed", 0, steps(0, 1, every)),
        ("hooks", 100, steps(100, 2, every)),
        ("sampled", 200, paused),
        ("lines", 300, steps(300, 3, every)),
    ]
    trace = _windows_trace(1000, windows)
    slow = stats.slow_steps_across(trace)
    assert slow is not None and slow.period == 100 and slow.count == 3 and slow.first == 50
    assert slow.median_ns == ms and slow.slow_ns == 7 * ms
    # One window alone holds one of them: no period (and under 3 slow steps, nothing).
    assert stats.slow_steps(steps(0, 1, every)) is None


def test_a_graph_growing_in_the_loop_fires_at_half_an_op_a_step_and_a_one_off_does_not():
    from profiler.diagnoses import performance

    (rule,) = [r for r in performance.RULES if r.id == "graph_growth"]
    f = {"label": "s.py", "ops_per_step": 0.499, "ops_from": 115, "ops_to": 1103}
    f["tracing_us"] = 2172.0
    assert rule.when(f)  # 988 ops over 1,976 steps: two session.run calls an iteration
    assert not rule.when({**f, "ops_per_step": 0.02, "ops_to": 125})  # a saver made once


def test_a_growing_graph_is_named_by_the_ops_and_the_line_that_make_them():
    # CS20's convnet: its test loop makes Softmax, Equal and ArgMax ops at lines 207-208; the
    # finding said "the loop creates ops (tf.assign, tf.add ... called inside it)".
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    ops = [
        {
            "type": "Softmax",
            "line": 207,
            "text": "  preds = tf.nn.softmax(logits_batch)",
            "seen": 20,
        },
        {"type": "Equal", "line": 208, "text": "correct = tf.equal(...)", "seen": 20},
        {"type": "ArgMax", "line": 208, "text": "correct = tf.equal(...)", "seen": 40},
    ]
    graph = {"kind": "graph", "label": "the default graph", "steps": [0, 100],
             "values": [411, 587], "ops": ops}  # fmt: skip
    memory = {"causes": {"every_s": 0.5, "probes": 9, "errors": 0, "probe_cost_ns": 900,
                         "grew": [graph]}}  # fmt: skip
    growth = {"ops_per_step": 1.294, "ops_from": 411, "ops_to": 587}
    trace = SimpleNamespace(script={"graph_growth": growth, "memory": memory})
    f: dict = {}
    performance._growth_facts(f, trace, None)
    assert f["graph_ops_where"] == (
        "(Softmax, Equal, ArgMax; line 207: `preds = tf.nn.softmax(logits_batch)`)"
    )
    assert f["graph_fix"].startswith("Build every op once, before the loop")
    # A Saver made in the loop (every 20 steps: 78% of the loop without the profiler): its fix.
    saver = {"type": "SaveV2", "line": 33, "text": "saver = tf.compat.v1.train.Saver()"}
    graph["ops"] = [{**saver, "seen": 16}]
    s: dict = {}
    performance._growth_facts(s, trace, None)
    assert s["graph_fix"].startswith("Create the Saver once, before the loop, and call its save")
    g: dict = {}
    performance._growth_facts(g, SimpleNamespace(script={"graph_growth": growth}), None)
    assert g["graph_ops_where"] == "(tf.assign, tf.add ... called inside it)"
    assert g["graph_rate"] == "1.294 ops every step"
    # The test loop alone grows it, the last 44 of 136 steady steps: not "every step".
    part = {**growth, "from_step": 8, "to_step": 144, "grew_from": 100, "grew_to": 144}
    h: dict = {}
    performance._growth_facts(h, SimpleNamespace(script={"graph_growth": part}), None)
    assert h["graph_rate"] == "176 ops in steps 100–144 only, 4 a step there,"
    # Timed steps that made no op measured no cost: not "0 µs a step".
    performance._graph_slow_facts(h)
    assert h["graph_cost_us"] == 0.0 and "not measured" in h["graph_cost"]


def test_steps_slowed_by_a_graph_growing_in_the_loop_are_its_cost_and_not_overhead():
    # A course-style TF1 loop running a new tf.square(loss) each iteration: every 2nd
    # session.run builds an executor (7x a normal step, 77% of the loop's time); tracing read
    # 462 µs a step. The slow steps' excess is the growth's cost; "run it less often" and
    # "overhead-bound: larger batches" are not its fixes.
    from profiler.diagnoses import performance

    facts = {
        "ops_per_step": 0.5,
        "tracing_us": 462.0,
        "slow_period": 2,
        "slow_excess_us": 7886.0,
        "slow_factor": 7.0,
        "slow_excess_pct": 77.0,
    }
    f = dict(facts)
    performance._graph_slow_facts(f)
    assert f["graph_cost_us"] == 7886.0 and f["slow_by_graph"]
    assert "one in every 2, take 7.0× a normal step: 77% of the loop's time" in f["graph_slow"]
    (slow_rule,) = [r for r in performance.RULES if r.id == "periodic_slow_steps"]
    assert not slow_rule.when({**f, "slow_by_graph": True})
    # A fit's epoch boundary (keras_adam's 130-batch epochs): per_epoch_cost's, not said twice.
    epochs = {**f, "slow_by_graph": False, "slow_period": 130}
    assert slow_rule.when({**epochs, "steps_per_epoch": 100})
    assert not slow_rule.when({**epochs, "steps_per_epoch": 130})
    # Slow steps every 10th with one new op every 2 steps: not the graph's (its own finding).
    g = {**facts, "slow_period": 10, "ops_per_step": 0.05}
    performance._graph_slow_facts(g)
    assert g["graph_cost_us"] == 462.0 and not g.get("slow_by_graph")


def test_a_short_fits_validations_are_timed_each_and_the_first_left_out():
    # A 3-epoch fit: the windows hold one boundary, the first (its test function's trace);
    # fit's validations are timed each (a siamese example: 28% measured without the profiler).
    from profiler.diagnoses import performance

    ms = 1_000_000
    fit = {"steps_per_epoch": 250, "validations_ns": [1800 * ms, 681 * ms, 700 * ms, 690 * ms]}
    e = performance._validations(fit, 5.4 * ms)
    assert e is not None and e.boundaries == 3 and e.excess_ns == 690 * ms
    assert e.share == pytest.approx(690 / (690 + 250 * 5.4))
    assert e.low_share == pytest.approx(681 / (681 + 250 * 5.4))
    # One validation (the first, with its trace) tells nothing recurring.
    assert performance._validations({**fit, "validations_ns": [1800 * ms]}, 5.4 * ms) is None
    # Validations run while a phase instrumented or altered the loop are not the script's.
    altered = performance._validations({**fit, "validations_altered": [1, 3]}, 5.4 * ms)
    assert altered is not None and altered.boundaries == 1 and altered.excess_ns == 700 * ms
    assert performance._validations({**fit, "validations_altered": [1, 2, 3]}, 5.4 * ms) is None


def test_a_library_function_traced_once_more_in_hundreds_of_steps_is_a_one_off():
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    fn = {"name": "multi_step_on_iterator", "own": False, "module": "keras", "calls": 740}
    trace = SimpleNamespace(
        warmup=SimpleNamespace(n_steps=10),
        script={"steps": 740, "functions": [{**fn, "trace_steps": [0, 500]}]},
    )
    f: dict = {}
    performance._retrace_facts(f, trace)
    assert "library_where" not in f and f.get("one_off_tracing")
    # Traced at every step: the library's tracing finding.
    trace.script["functions"][0]["trace_steps"] = list(range(0, 740, 2))
    f = {}
    performance._retrace_facts(f, trace)
    assert "multi_step_on_iterator" in f["library_where"] and not f.get("one_off_tracing")


def test_one_fast_block_among_level_ones_is_no_growth_but_a_steady_rise_is() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    # A DQN's blocks beside a busy process: the medians level at ~304 ms but one block of
    # faster steps; the trimmed means rose from that block on (276, 200, 288 ... 319 ms).
    medians = [303.6, 178.2, 304.2, 304.9, 303.8, 304.2, 307.2]
    means = [276.4, 200.3, 288.7, 301.6, 288.7, 295.5, 319.3]

    def facts(medians: list[float], means: list[float], cpu: list[float] | None = None) -> dict:
        rows = [{"from_step": 0, "to_step": 25, "median_us": 3e5, "instrumented": True}]
        rows += [
            {
                "from_step": 26 * (i + 1),
                "to_step": 26 * (i + 2) - 1,
                "median_us": 1e3 * m,
                "mean_us": 1e3 * a,
                "instrumented": False,
                **({"cpu_us": 1e3 * cpu[i]} if cpu else {}),
            }
            for i, (m, a) in enumerate(zip(medians, means, strict=True))
        ]
        trace = SimpleNamespace(script={"blocks": rows}, phase=lambda _name: None)
        f: dict = {"label": "dqn.py", "step_us": 249_156.0, "name": "dqn.py"}
        performance._trend_facts(f, trace, SimpleNamespace(drift=None))
        return f

    level = facts(medians, means)
    assert level["trend_rising"] < performance.TREND_RISING
    assert not [
        d for d in evaluate(performance.RULES, "workload", [level]) if d.rule == "steps_slow_down"
    ]
    # Steps that do grow, 5% a block in medians and means alike: named.
    grow = [300.0 * 1.05**i for i in range(7)]
    rising = facts(grow, grow)
    assert rising["trend_rising"] == 1.0
    assert [
        d for d in evaluate(performance.RULES, "workload", [rising]) if d.rule == "steps_slow_down"
    ]
    # The wall time rising while the CPU time a step stays level (another process took the
    # cores: an eager loop's blocks 26 -> 45 ms beside a busy process): no growth of the work.
    level_cpu = [30.0, 29.0, 31.0, 30.0, 29.5, 30.5, 30.0]
    contended = facts(grow, grow, level_cpu)
    assert contended["trend_cpu_rising"] < performance.TREND_CPU_RISING
    assert not [
        d
        for d in evaluate(performance.RULES, "workload", [contended])
        if d.rule == "steps_slow_down"
    ]
    # More work a step: its CPU time rises with the wall time.
    working = facts(grow, grow, [0.1 * g for g in grow])
    assert [
        d for d in evaluate(performance.RULES, "workload", [working]) if d.rule == "steps_slow_down"
    ]


def test_steps_that_jump_to_a_level_and_stay_are_a_change_of_work_not_a_growth() -> None:
    # A DQN's steps before its replay memory filled and after (blocks of one run beside the
    # suite's other work): "+267 µs every 100 steps ... something grows with every step".
    from types import SimpleNamespace

    from profiler.analysis import stats
    from profiler.diagnoses import performance

    def found(
        medians: list[float],
        cpu: list[float],
        others: list[float] | None = None,
        fit: dict | None = None,
        timed_at: int = 20,
    ) -> tuple[dict, set[str]]:
        rows = [
            {
                "from_step": 260 * (i + 3),
                "to_step": 260 * (i + 4) - 1,
                "median_us": m,
                "mean_us": m,
                "cpu_us": c,
                "instrumented": False,
                "others_cores": others[i] if others else None,
            }
            for i, (m, c) in enumerate(zip(medians, cpu, strict=True))
        ]
        rows.insert(0, {"from_step": 0, "to_step": 259, "median_us": 69.0, "instrumented": True})
        timed = SimpleNamespace(window=Window("timed", (Segment(timed_at, (0,) * 41),)))
        trace = SimpleNamespace(
            script={"blocks": rows, "fit": fit or {}, "wall_s": 25.0},
            phase=lambda name: timed if name == "timed" else None,
        )
        f: dict = {"label": "dqn.py", "step_us": 69.0, "name": "dqn.py"}
        performance._trend_facts(f, trace, SimpleNamespace(drift=None))
        fired = evaluate(performance.RULES, "workload", [f])
        f["text"] = " ".join(f"{d.message} {d.fix}" for d in fired)
        return f, {d.rule for d in fired}

    medians = [68.9, 69.2, 70.4, 3424.1, 3653.4, 3541.8, 3484.3]
    f, rules = found(medians, [139.3, 137.0, 1544.8, 6884.3, 7583.8, 7094.8, 7320.1])
    assert rules == {"steps_change_level"}, rules
    assert f["shift_step"] == 260 * 6 and round(f["shift_ratio"]) == 51, f
    text = f["text"]
    assert "from about iteration 1,560 of the loop, steps take 3,542 µs, 51.2× the 69 µs" in text
    assert (
        "the timed window's steps (iterations 20–59), which the split above describes, ran" in text
    )
    # The same jump in the wall time alone (a busy process starting mid-run): no change of work.
    _, rules = found(medians, [139.0] * 7)
    assert "steps_change_level" not in rules and "steps_slow_down" not in rules, rules
    # The same jump in both, where other processes kept a core more busy from then on (a numpy
    # loop's two BLAS threads spin waiting for a core: its CPU time rose with the wall time,
    # and its work per iteration did not change): the machine's, no finding.
    cpu = [139.3, 137.0, 1544.8, 6884.3, 7583.8, 7094.8, 7320.1]
    g, rules = found(medians, cpu, [0.1, 0.2, 0.1, 1.1, 1.0, 1.2, 0.9])
    assert "steps_change_level" not in rules and g.get("shift_load"), rules
    # A load that did not change with the steps leaves the finding.
    _, rules = found(medians, cpu, [0.6, 0.7, 0.5, 0.6, 0.8, 0.6, 0.7])
    assert rules == {"steps_change_level"}, rules
    # Where another model's fit began there (the overfitting tutorial fits four models in a
    # row; the last, 60-72% of the time, read as "the loop does more work a step"): that fit.
    fits = {
        "models": 2,
        "calls": 2,
        "call_steps": [0, 1560],
        "call_ms": [2000.0, 18000.0],
        "call_models": ["tiny", "large"],
    }
    f, rules = found(medians, cpu, fit=fits)
    assert rules == {"later_fit_slower"}, rules
    assert (
        "from step 1,560 the script fits another model (its fit call 2 of 2 (model 'large'), "
        "from step 1,560: the calls took 2.0 s, 18.0 s, 90% of them from that call on)"
    ) in f["text"]
    assert "python -m profiler run dqn.py --warmup 1570" in f["text"]
    # Its share of the script, which the verdict leads with where it is half or more.
    (d,) = [d for d in evaluate(performance.RULES, "workload", [f]) if d.rule == "later_fit_slower"]
    assert d.script_pct == 72.0 and d.lead.startswith(
        "a later fit (model 'large'), fit call 2 of 2 from step 1,560, took 72% of the script's "
        "25.0 s, its steps"
    ), d.lead
    # The timed window in that fit's steps (--warmup past the earlier fits): named, and
    # nothing left to measure apart.
    f, rules = found(medians, cpu, fit=fits, timed_at=1570)
    assert rules == {"later_fit_measured"}, rules
    assert "another model's training, not a change in the loop" in f["text"]
    assert "--warmup" not in f["text"]
    # One model fit again (a loop of fit calls on the same model): the change of work.
    _, rules = found(medians, cpu, fit={**fits, "models": 1})
    assert rules == {"steps_change_level"}, rules
    # A steady growth is no jump: its halves rise as much as they are apart.
    grow = [300.0 * 1.15**i for i in range(7)]
    assert stats.level_shift([float(i) for i in range(7)], grow) is None
    _, rules = found(grow, [0.5 * g for g in grow])
    assert rules == {"steps_slow_down"}, rules


def test_a_rise_in_the_timed_window_that_the_runs_last_steps_do_not_show_is_no_growth() -> None:
    # A healthy fit beside other work: "+49,093 µs every 100 steps (272.8% of the step), in the
    # timed window" of 18 ms steps; its epochs' medians 19, 20, 18, 16, 11 ms (all overlapping
    # an instrumented window, so no trend across them).
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    step_ns = 18_000_000
    durations = [step_ns + 500_000 * i for i in range(60)]  # rising steadily in the window
    bounds = [0]
    for d in durations:
        bounds.append(bounds[-1] + d)
    window = Window("timed", (Segment(120, tuple(bounds)),))
    medians = [19.4, 20.1, 18.2, 16.3, 11.4]
    rows = [
        {"from_step": 110 * i, "to_step": 110 * i + 109, "median_us": 1e3 * m, "instrumented": True}
        for i, m in enumerate(medians)
    ]

    def found(rows: list[dict]) -> set[str]:
        timed = SimpleNamespace(window=window)
        trace = SimpleNamespace(
            script={"blocks": rows},
            phase=lambda name: timed if name == "timed" else None,
            work=SimpleNamespace(units_per_step=1),
        )
        f: dict = {"label": "fit.py", "step_us": 18_000.0, "name": "fit.py"}
        performance._trend_facts(f, trace, SimpleNamespace(drift=None))
        return {d.rule for d in evaluate(performance.RULES, "workload", [f])}

    assert "steps_slow_down" not in found(rows)
    # The run's last steps slower than the window's: the rise stands.
    later = [*rows[:-1], {**rows[-1], "median_us": 60_000.0}]
    assert "steps_slow_down" in found(later)


def test_blocks_carry_the_processes_cpu_time_per_step() -> None:
    import array

    from profiler.capture.script import driver

    # 40 steps of 1 ms; CPU read at ends 0, 16, 32: 0.5 ms of CPU a step.
    ends = array.array("q", [1_000_000 * (i + 1) for i in range(40)])
    cpu = array.array("q", [0, 0, 16, 8_000_000, 32, 16_000_000])
    first, second = driver.blocks(0, ends, 20, 0, cpu)
    assert first["cpu_us"] == 500.0 and second["cpu_us"] is None  # one reading in 20..39
    assert first["median_us"] == 1_000.0


def test_blocks_get_the_cores_other_processes_kept_busy_while_they_ran() -> None:
    from profiler.capture.script import driver

    # Readings every 0.1 s (steps done, time, others' busy ns so far): 0.5 cores busy while
    # steps 0-99 ran, 1.5 while 100-199 did.
    loads = [(10 * k, 100_000_000 * k, 50_000_000 * k) for k in range(11)]
    loads += [(100 + 10 * k, 1_000_000_000 + 100_000_000 * k, 500_000_000 + 150_000_000 * k)
              for k in range(1, 11)]  # fmt: skip
    assert driver.others_cores(loads, 0, 99) == 0.5
    assert driver.others_cores(loads, 110, 199) == 1.5
    # Under two readings, or under 0.2 s of them: not read.
    assert driver.others_cores(loads, 0, 9) is None
    assert driver.others_cores(loads, 300, 400) is None


def test_the_periodic_line_is_not_a_call_of_the_function_running_the_steps() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance
    from profiler.model import LineStat

    # A GAN's iteration: generator.predict, then three train_on_batch steps; the script calls
    # iteration(epoch) once every 3 steps, so that line runs at the slow steps' period too,
    # and holds them all (127.8 ms a call, the steps 21 ms).
    f = "/home/u/gan.py"
    lines = (
        LineStat(f, 118, "<module>", 17, 17 * 127_800_000, "iteration(epoch)"),
        LineStat(f, 80, "iteration", 17, 17 * 93_600_000, "gen = generator.predict(noise)"),
        LineStat(f, 81, "iteration", 17, 17 * 9_000_000, "d.train_on_batch(imgs, valid)"),
    )
    rec = SimpleNamespace(lines=lines, data=SimpleNamespace(steps_profiled=53))
    trace = SimpleNamespace(script={}, phase=lambda name: rec if name == "lines" else None)
    said = performance._slow_line(trace, 3, 47_000_000)
    assert said.startswith("Line 80 (`gen = generator.predict(noise)`) runs 17 times"), said


def test_python_the_steps_graph_calls_is_named_with_its_function_not_as_input() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance, py_in_step
    from profiler.model.records import OpRow

    # A numpy AUC through tf.py_function in a custom train step (31% of the step measured
    # without the profiler): EagerPyFunc once a step, 293 µs of a 1,360 µs framework step.
    rows = (
        OpRow("EagerPyFunc", "EagerPyFunc", 200, 293_417, 58_683_423, 0.46),
        OpRow("IteratorGetNext", "IteratorGetNext", 200, 169_362, 33_872_436, 0.26),
        OpRow("sequential/dense/MatMul", "MatMul", 200, 39_350, 7_870_023, 0.28),
    )
    table = SimpleNamespace(steps=200, rows=rows)
    fw = SimpleNamespace(xplane_op_table=table, op_table=None)
    window = SimpleNamespace(durations_ns=lambda: (1_360_000,) * 200)
    auc = "np_roc_auc (train.py:44)"
    functions = [{"name": "train_step", "calls": 14_070, "own": True, "python_calls": [auc]}]
    trace = SimpleNamespace(
        script={"steps": 14_070, "functions": functions},
        data=lambda name: fw if name == "framework" else None,
        phase=lambda name: SimpleNamespace(window=window) if name == "framework" else None,
    )
    f: dict = {"label": "t.py", "name": "t.py", "step_us": 1_357.0}
    py_in_step.py_facts(f, trace)
    (d,) = evaluate(py_in_step.RULES, "workload", [f])
    assert d.rule == "py_function_in_step" and "(np_roc_auc (train.py:44)): 22%" in d.message
    assert "every N steps" in d.fix and d.cost_us == pytest.approx(0.2157 * 1_357, rel=1e-3)
    # Its kernels are not called the input pipeline's.
    f.update(purpose="input pipeline", purpose_share_pct=72.0, purpose_step_pct=24.0)
    f.update(purpose_fix="move the input work out of the step", compute_pct=33.0)
    f.update(purpose_us=322.0, purpose_kernels="EagerPyFunc 46%")
    assert "kernels_not_arithmetic" not in {
        d.rule for d in evaluate(performance.RULES, "workload", [f])
    }
    # A py_function only in a validation step called now and then: not the step's.
    functions[0]["calls"] = 100
    g: dict = {"label": "t.py", "name": "t.py", "step_us": 1_357.0}
    py_in_step.py_facts(g, trace)
    assert "py_step_pct" not in g


def test_data_embedded_in_a_tf1_graph_is_named_with_its_first_steps_cost():
    # CS20's logistic regression: 172 MB of MNIST in the graph through from_tensor_slices;
    # its first steps took 12.7 s of a 33.4 s run beyond steady ones, and nothing named them.
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    largest = {"name": "normalize_element/component_0", "dtype": "float32",
               "shape": [55000, 784], "bytes": 172_480_000}  # fmt: skip
    script = {"graph_constants": {"bytes": 174_680_000, "ops": 60, "largest": largest},
              "wall_s": 33.4, "steps": 3537}  # fmt: skip
    wa = SimpleNamespace(one_off=SimpleNamespace(warmup_excess_ns=12_674_000_000))
    f: dict = {"label": "s.py"}
    performance._constants_facts(f, SimpleNamespace(script=script), wa)
    (rule,) = [r for r in performance.RULES if r.id == "graph_constants"]
    assert rule.when(f) and all(k in f for k in rule.needs if k != "label")
    text = rule.message.format(**f)
    assert "the graph holds 175 MB of constants (the largest `normalize_element/component_0`, " \
        "float32 (55000, 784))" in text  # fmt: skip
    assert "the first steps took 12.7 s beyond steady ones, 38% of the script's 33.4 s" in text
    assert f["const_cost_us"] == pytest.approx(12.674e6 / 3537)
    # First steps as quick as steady ones, or small constants: nothing to say.
    for quick in (SimpleNamespace(one_off=SimpleNamespace(warmup_excess_ns=500_000_000)), None):
        g: dict = {}
        performance._constants_facts(g, SimpleNamespace(script=script), quick)
        assert "const_mb" not in g
    small = {**script, "graph_constants": {"bytes": 4_000_000, "ops": 60, "largest": largest}}
    h: dict = {}
    performance._constants_facts(h, SimpleNamespace(script=small), wa)
    assert "const_mb" not in h


def test_a_tf_loops_sleep_is_named_from_its_line_and_is_no_per_call_overhead() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance, waiting
    from profiler.model import Frame, Sample

    # A tf.function loop sleeping 4 ms a step (~80% of the loop without the profiler): sampled
    # without --native its sleep is its line's Python; it read "96% overhead: the
    # tf.function call's per-call cost" and the fix "run several steps per call".
    line = Frame("<module>", "/home/me/train.py", 22)
    samples = (
        Sample((line,), 80, "main"),
        Sample((Frame("<module>", "/home/me/train.py", 20),), 25, "main"),
    )
    sampled = SimpleNamespace(samples=samples)
    trace = SimpleNamespace(phase=lambda name: sampled if name == "sampled" else None)
    f = {"label": "train.py", "name": "train.py", "framework": "tf2", "step_us": 5000.0}
    f.update(overhead_us=4800.0, overhead_pct=96.0, compute_us=200.0, hot_line=22)
    f.update(hot_line_source="time.sleep(0.004)", hot_line_share_pct=76.0, hot_line_us=3800.0)
    f.update(hot_line_function="<module>")
    waiting.wait_facts(f, trace)
    found = {d.rule: d for d in evaluate(waiting.RULES, "workload", [f])}
    d = found["sleep_in_steps"]
    assert "the steps sleep 76% ±" in d.message and "booked as Python" in d.message
    assert "line 22 (`time.sleep(0.004)`)" in d.message
    # Not overhead a larger batch would spread, and the hot line's finding gives way.
    assert f["overhead_pct"] == 20.0 and "hot_line_us" not in f
    assert not performance._overhead_bound({**f, "units_per_step": 1})
    # A hot line that does not sleep is left to its own finding.
    g = {
        "label": "t.py",
        "step_us": 5000.0,
        "hot_line_source": "log(x)",
        "hot_line_share_pct": 76.0,
    }
    waiting.wait_facts(g, trace)
    assert "sleep_share" not in g


def test_an_eager_loops_sleep_is_no_python_tf_function_would_remove() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance, step_lines, waiting
    from profiler.model import Frame, Sample

    # The tf.data guide's loop: its training step a time.sleep(0.01), 70% of the step, booked as
    # Python by the samples; it read "eager execution spends 9,960 µs per step in Python ...
    # wrap the body of the loop in tf.function". A loop found by the automatic step names only
    # lines beside the math: a sleep is one.
    assert step_lines._beside_the_math("time.sleep(0.01)")
    assert step_lines._beside_the_math("sleep(delay)")
    assert not step_lines._beside_the_math("loss = step(x)")
    line = Frame("benchmark", "/home/me/naive.py", 32)
    samples = (
        Sample((line,), 95, "main"),
        Sample((Frame("benchmark", "/home/me/naive.py", 30),), 40, "main"),
    )
    sampled = SimpleNamespace(samples=samples)
    trace = SimpleNamespace(phase=lambda name: sampled if name == "sampled" else None)
    f = {"label": "naive.py", "name": "naive.py", "framework": "tf2", "step_us": 14_153.0}
    f.update(eager=True, python_us=9_960.0, dispatch_us=0.0, step_function="the loop's body")
    f.update(python_dispatch_us=9_960.0, python_dispatch_pct=70.4, hot_line=32)
    f.update(hot_line_source="time.sleep(0.01)", hot_line_share_pct=70.0, hot_line_us=9_900.0)
    f.update(hot_line_function="benchmark")
    waiting.wait_facts(f, trace)
    found = {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    assert "sleep_in_steps" in found and "eager_dispatch" not in found
    assert f["python_us"] < 0.35 * 9_960.0 and f["python_dispatch_pct"] < 25


def test_a_step_twice_as_long_every_tenth_step_is_periodic_and_random_ones_are_not() -> None:
    import random

    from profiler.analysis import stats

    # An eager loop's checkpoint every 10 steps: ~12 ms of saving against ~12 ms steps (2x,
    # under the 3x outlier factor); without the lower factor no finding named it.
    rng = random.Random(3)
    d = [int(10_000 * rng.uniform(0.9, 1.1)) + (11_000 if i % 10 == 9 else 0) for i in range(300)]
    s = stats.slow_steps(d)
    assert s is not None and s.period == 10 and s.first == 9 and s.count == 30
    assert 0.08 <= s.excess_share <= 0.12
    # As many steps 2x at random positions: no period.
    noisy = [int(10_000 * rng.uniform(0.9, 1.1)) for _ in range(300)]
    for i in rng.sample(range(300), 30):
        noisy[i] += 11_000
    n = stats.slow_steps(noisy)
    assert n is None or n.period is None


def test_a_tf_function_defined_inside_the_loop_is_named_with_its_traces_as_its_cost() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    # A custom loop's @tf.function train_step defined inside its 25-epoch loop (32 batches an
    # epoch): 77% of the loop without the profiler; told "something runs every 32 steps".
    fn = {"name": "train_step", "calls": 32, "retraces": 0, "module": "__main__", "own": True}
    trace = SimpleNamespace(script={"functions": [dict(fn) for _ in range(25)]})
    f: dict = {
        "label": "loop.py",
        "slow_period": 32,
        "slow_excess_us": 6_000.0,
        "slow_excess_pct": 86.0,
        "slow_factor": 203.6,
        "slow_count": 21,
        "slow_us": 202_793.0,
        "slow_what": "Something runs every 32 steps",
        "step_us": 1_020.0,
        "tracing_pct": 11.8,
        "one_off_tracing": True,
        "one_off_what": "",
    }
    performance._recreated_facts(f, trace)
    fired = {d.rule: d for d in evaluate(performance.RULES, "workload", [f])}
    assert set(fired) == {"function_recreated"}, sorted(fired)
    d = fired["function_recreated"]
    assert d.message == (
        "loop.py: the tf.function `train_step` was made anew 25 times, 32 calls each, and each "
        "new one is traced at its first call: the steps that trace a new one, one in every 32, "
        "take 203.6× a normal step: 86% of the loop's time."
    )
    assert d.fix.startswith("Define `train_step` once, before the loop") and d.cost_us == 6_000.0
    # Two functions of one name (a train and a test step's): not made in a loop.
    f2: dict = {"label": "loop.py"}
    performance._recreated_facts(f2, SimpleNamespace(script={"functions": [fn, fn]}))
    assert "recreated_fn" not in f2


def test_overhead_that_is_the_executors_cost_per_op_is_not_told_to_run_more_steps_a_call():
    from profiler.diagnoses import performance

    # A Keras LSTM (20 time steps of small ops) in fit: 11.0 ms of its 14.2 ms overhead is the
    # executor's per-op cost, 1.0 ms the call's; steps_per_execution=4 was 1.1-1.7x slower
    # without the profiler, and "fit's per-batch machinery ... steps_per_execution" was said.
    f = {"label": "lstm.py", "name": "lstm.py", "framework": "keras", "step_us": 23_776.0}
    f.update(overhead_pct=60.0, overhead_us=14_257.0, compute_us=9_519.5, units_per_step=1)
    f.update(tracing_pct=1.0, flops=None, uses_function=True, python_us=772.0)
    f.update(per_op_us=10_968.0, per_call_us=983.0)
    performance._per_op_fix(f)
    found = {d.rule: d for d in evaluate(performance.RULES, "workload", [f])}
    assert "overhead_bound_keras" not in found and "per_op_bound" in found, sorted(found)
    d = found["per_op_bound"]
    assert "10,968 µs of it is the graph executor's cost per op inside the call" in d.message
    assert d.fix.startswith("Fewer, larger ops: XLA (jit_compile=True) fuses them")
    # Its input pipeline's threads taking a core (a timeseries dataset's per-window map):
    # the ops wait for a core between kernels, not a per-op finding.
    busy = {**f, "busy_share": 0.95, "competing_share": 0.5}
    assert "per_op_bound" not in {d.rule for d in evaluate(performance.RULES, "workload", [busy])}
    # The call's own cost the larger: fit's per-batch machinery, as before.
    f.update(per_op_us=2_000.0, per_call_us=9_000.0)
    found = {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    assert "overhead_bound_keras" in found and "per_op_bound" not in found
    # Python making the batches on tf.data's thread beside the step (a PyDataset's
    # __getitem__): their time, not fit's per-batch machinery; steps_per_execution leaves it.
    made = {**f, "gen_step_pct": 40.0, "input_pct": 10.0}
    assert "overhead_bound_keras" not in {
        d.rule for d in evaluate(performance.RULES, "workload", [made])
    }
    # A callback's line holding most of the batch (model.predict at every batch end, 97%):
    # step_line's, not fit's per-batch machinery said a second time.
    for share, fires in ((97.0, False), (20.0, True)):
        line = {**f, "hot_line_share_pct": share}
        found = {d.rule for d in evaluate(performance.RULES, "workload", [line])}
        assert ("overhead_bound_keras" in found) == fires, (share, sorted(found))


def test_kernels_slowed_by_python_batches_beside_them_are_not_called_compute_bound():
    from profiler.diagnoses import performance

    # A generator's per-sample augmentation fed to fit: the conv kernels read 20.0 ms of a
    # 26.1 ms step beside it, where the whole step without it took 8.4 ms without the profiler.
    f = {"label": "gen.py", "name": "gen.py", "framework": "keras", "step_us": 26_134.0}
    f.update(compute_us=20_016.0, compute_pct=76.6, top_kernels="_MklNativeConv2D 40%")
    f.update(overhead_pct=23.4, overhead_us=6_118.0, units_per_step=1, flops=None)
    f.update(compute_fix=performance.COMPUTE_FIX)
    assert "compute_bound" in {d.rule for d in evaluate(performance.RULES, "workload", [f])}
    f.update(gen_step_pct=47.0, input_pct=5.0)
    assert "compute_bound" not in {d.rule for d in evaluate(performance.RULES, "workload", [f])}


def test_every_fix_measured_by_a_whatif_names_a_rule_and_whatifs_that_exist() -> None:
    """``WHATIF_FOR`` joins rule ids to what-if ids by string: a renamed rule or what-if would
    silently lose the fix's measurement on the user's loop."""
    from profiler.capture import whatifs
    from profiler.diagnoses import job, memory
    from profiler.diagnoses.performance import RULES, WHATIF_FOR

    rule_ids = {r.id for r in (*RULES, *job.RULES)}
    assert set(WHATIF_FOR) <= rule_ids, set(WHATIF_FOR) - rule_ids
    known = set(whatifs.ids())
    named = {w for ids in (*WHATIF_FOR.values(), *memory.WHATIF_FOR_CAUSE.values()) for w in ids}
    assert named <= known, named - known
    assert len(known) == len(whatifs.ids())
    # A fix is quoted only with what measured that fix: feeding through tf.data still pays
    # session.run each step, and the native callable removes all of its Python side (CS20's
    # linear regression: 134 µs quoted under the tf.data fix, which saved ~65 µs).
    assert "feed_dict_batches" not in WHATIF_FOR


def test_the_top_kernels_of_a_compute_bound_step_are_its_arithmetic_and_the_rest_are_named():
    """A fit checkpointing every 20-batch epoch read "compute-bound ... the top kernels are
    MakeIterator 30%": the epochs' iterators are the input pipeline's, said as such."""
    from profiler.diagnoses.performance import _compute_facts
    from tests.builders import framework_data, op_table

    rows = [("sequential/dense/MatMul", "_MklMatMul", 500_000),
            ("MakeIterator", "MakeIterator", 300_000),
            ("sequential/dense/Relu", "Relu", 200_000)]  # fmt: skip
    fw = framework_data(1_000_000, op_table=op_table("xplane", rows, 1))

    class Trace:
        def data(self, name: str):
            return fw if name == "framework" else None

    f = {"step_us": 1300.0, "compute_us": 1000.0}
    _compute_facts(f, Trace())
    assert f["top_kernels"] == (
        "_MklMatMul 50%, Relu 20%; input pipeline 30% (MakeIterator 30%)"
    ), f["top_kernels"]
    assert f["arithmetic_share"] == pytest.approx(0.7)
    # The epochs' iterators, made at each epoch's start: fewer, longer epochs, not another
    # pipeline (a fit called 80 times in a loop was told "a tf.data pipeline with map(...)").
    from profiler.diagnoses.performance import ITERATOR_SETUP_FIX

    assert f["purpose_fix"] == ITERATOR_SETUP_FIX
    # Kernels that are all the arithmetic are listed as they were.
    fw = framework_data(1_000_000, op_table=op_table("xplane", [rows[0], rows[2]], 1))
    f = {"step_us": 1300.0, "compute_us": 1000.0}
    _compute_facts(f, Trace())
    assert f["top_kernels"] == "_MklMatMul 71%, Relu 29%"


def test_a_flop_count_that_missed_a_loops_body_gives_no_rate():
    """TF's DeepDream tutorial runs its gradient-ascent steps in a tf.while_loop inside one
    tf.function, whose body TensorFlow's count does not enter: "4 flops at 0.0 GFLOP/s, 0% of
    this machine's 43 GFLOP/s" over 1.27 s of conv kernels."""
    from dataclasses import replace

    from profiler.diagnoses.performance import _compute_facts
    from profiler.model.records import StepMedians
    from tests.builders import framework_data, op_table

    rows = [("dream/conv", "_MklNativeFusedConv2D", 1_000_000)]

    def facts(flops: int) -> dict:
        fw = replace(
            framework_data(1_000_000, op_table=op_table("xplane", rows, 1)),
            median_ns=StepMedians(kernel_union_ns=1_000_000, kernels=300),
            peak_gflops=43.0,
            flops_per_step=flops,
        )
        trace = type("T", (), {"data": lambda self, name: fw if name == "framework" else None})()
        f = {"step_us": 1010.0, "compute_us": 1000.0, "units_per_step": 1}
        _compute_facts(f, trace)
        return f

    missed = facts(4)
    assert "gflops" not in missed and missed["flops_missed"]
    counted = facts(2_000_000)
    assert counted["gflops"] == pytest.approx(2.0) and "flops_missed" not in counted


def test_a_compute_bound_step_in_mixed_precision_is_told_to_time_the_policies_not_to_try_it():
    """The mixed-precision guide's model run on a CPU under mixed_float16 (1.2-1.3x slower
    than float32 there, mixed_bfloat16 2x faster, without the profiler) was told to "try ...
    mixed precision"."""
    from profiler.diagnoses.performance import COMPUTE_FIX, _compute_fix

    assert _compute_fix(None) == COMPUTE_FIX == _compute_fix("float64")
    fix = _compute_fix("mixed_float16")
    assert fix.startswith("The script runs Keras's mixed_float16 policy")
    assert "set_global_policy('float32')" in fix and "'mixed_bfloat16'" in fix
    assert "try each" not in fix


def test_a_compute_bound_step_is_told_the_precision_this_cpu_computes_natively() -> None:
    """Keras's VAE example and TF's style transfer tutorial, compute-bound on a CPU with
    avx512_bf16 and no float16 arithmetic, were told "XLA ... or mixed precision: try each":
    without the profiler mixed_float16 (the guide's "mixed precision") ran the VAE 4x slower
    than float32, mixed_bfloat16 2x faster (65 against 129 ms a step)."""
    from profiler.capture.script.worker import ARITH_FLAGS, cpu_arith
    from profiler.diagnoses.performance import COMPUTE_FIX, XLA_CLAUSE, _compute_fix

    here = cpu_arith()
    assert here is None or set(here) <= set(ARITH_FLAGS)
    assert _compute_fix(None, None) == COMPUTE_FIX  # flags not read: as before
    bf16 = _compute_fix(None, ["avx512_bf16"])
    assert "mixed_bfloat16" in bf16 and "(avx512_bf16)" in bf16
    assert "not mixed_float16" in bf16 and XLA_CLAUSE in bf16
    both = _compute_fix(None, ["avx512_bf16", "avx512_fp16"])
    assert "mixed_bfloat16" in both and "not mixed_float16" not in both
    fp16 = _compute_fix(None, ["avx512_fp16"])
    assert "Keras's mixed_float16 policy" in fp16 and "bfloat16" not in fp16
    none = _compute_fix(None, [])
    assert "mixed precision is unlikely to help here" in none and "mixed_bfloat16" not in none
    # A script already under a mixed policy keeps its own advice.
    assert _compute_fix("mixed_float16", ["avx512_bf16"]) == _compute_fix("mixed_float16")
    # A TF1 session's graph has no Keras policy and no jit_compile (a convnet built from
    # tf.nn ops was told of both): its own ways.
    tf1 = _compute_fix(None, ["avx512_bf16"], tf1=True)
    assert "Keras" not in tf1 and "jit_compile" not in tf1
    assert "the graph's weights, inputs and ops in tf.bfloat16" in tf1
    assert "TF_XLA_FLAGS='--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit'" in tf1


def test_xla_measured_slower_leaves_a_compute_bound_fix() -> None:
    from types import SimpleNamespace as NS

    from profiler.diagnoses import performance
    from profiler.diagnoses.engine import Diagnosis

    fix = performance._compute_fix(None, ["avx512_bf16"])
    d = Diagnosis("compute_bound", "workload", "vae.py", "vae.py is compute-bound", fix)
    slower = NS(
        id="keras_jit", verdict="slower", measured_us=-110_000.0, saves=False,
        interval_us=(-160_000.0, -60_000.0), predicted_us=546.0, status="ok",
        title="fit's train function compiled with XLA", baseline_us=85_000.0,
        variant_us=195_000.0, pairs=3,
    )  # fmt: skip
    out = performance._measured_fix(d, {"keras_jit": slower}, {}, "")
    assert performance.XLA_CLAUSE not in out.fix and "mixed_bfloat16" in out.fix
    assert "Measured on your loop, with fit's train function compiled with XLA: slower" in out.fix
    # Inconclusive, its blocks leaning faster: XLA stays among the things to time.
    unsure = NS(**{**vars(slower), "verdict": "inconclusive", "interval_us": (-250e3, 600e3),
                   "measured_us": 50_000.0})  # fmt: skip
    out = performance._measured_fix(d, {"keras_jit": unsure}, {}, "")
    assert performance.XLA_CLAUSE in out.fix
    # Leaning slower (the Keras VAE's: 144.65 ms as written, 459.74 with it; 1.8x slower
    # without the profiler): timed, and no longer "time it".
    leaned = NS(**{**vars(unsure), "measured_us": -315_000.0, "interval_us": (-457e3, 64e3)})
    out = performance._measured_fix(d, {"keras_jit": leaned}, {}, "")
    assert performance.XLA_CLAUSE not in out.fix


def test_growth_with_no_cause_is_a_finding_only_where_its_interval_is_tight() -> None:
    """The mixed-precision guide's 35-step fit: "grows by 570 KB every step (95%: 12 to
    44,730 KB)", an allocator filling over ~20 steps and level after them (measured without
    the profiler); a loop keeping 64 KB a step reads 60 to 70 KB."""
    from profiler.diagnoses import memory

    f = {"mem_grows": True, "mem_cause_kind": "", "mem_late": True, "mem_added_mb": 13.9,
         "mem_last_mb": 1409.0, "mem_kb_per_step": 570.0, "mem_low_kb": 12.0}  # fmt: skip
    assert not memory._grows(f)
    assert memory._grows({**f, "mem_kb_per_step": 64.0, "mem_low_kb": 60.0})
    # A cause seen (a list of the script's growing) needs no tight interval.
    assert memory._grows({**f, "mem_cause_kind": "container"})


def test_long_first_steps_of_the_passes_are_the_work_between_them_at_the_passes_length() -> None:
    """The distributed-training tutorial's loop: an evaluation and a checkpoint after each
    63-step epoch (125-180 ms, 10-14% of the loop without the profiler). Its first boundary
    held a trace, its last the what-ifs': two were left, under the framework phase's tracer
    and the line profiler, and read "2 steps at no period, 792 ms more: 32% of the loop"."""
    from types import SimpleNamespace

    from profiler.diagnoses import long_steps

    rows = [{"step": 126, "us": 1_371_236.6, "median_us": 20_073.9, "phase": "framework",
             "after_pass_end": True},
            {"step": 189, "us": 243_916.4, "median_us": 11_293.4, "phase": "lines",
             "after_pass_end": True}]  # fmt: skip
    record = {"steps": rows, "left_out": 99, "spans": [], "passes": {"ends": 5, "length": 63}}
    script = {"long_steps": record, "steps": 315, "functions": []}
    trace = SimpleNamespace(script=script, warmup=SimpleNamespace(n_steps=18))
    f = {"step_us": 16_808.0, "framework": "tf2"}
    long_steps.long_facts(f, trace)
    assert f["long_period"] == 63 and f["long_count"] == 2
    assert f["long_how"] == "the first step of each pass over the steps' loop (every 63 steps) took"
    # The least inflated of the instrumented ones: 232.6 ms, against 16.8 ms steps.
    assert f["long_each_ms"] == pytest.approx(232.6, abs=0.1)
    assert 15 < f["long_pct"] < 20, f["long_pct"]
    assert f["long_what"] == long_steps.BETWEEN_PASSES
    # Passes over a tf.data pipeline: each makes its iterator anew (TF's data performance
    # guide's generator "opening a file" each epoch read "an evaluation, a checkpoint").
    data = {**script, "pipelines": [{"stages": [{"kind": "from_generator"}]}]}
    h = {"step_us": 16_808.0, "framework": "tf2"}
    long_steps.long_facts(h, SimpleNamespace(script=data, warmup=trace.warmup))
    assert h["long_what"] == long_steps.BETWEEN_PASSES_DATA
    assert h["long_fix"].startswith("Iterate one stream across the passes")
    # Without the passes, the same two steps are a few at no period, as before.
    g = {"step_us": 16_808.0, "framework": "tf2"}
    bare = [{k: v for k, v in r.items() if k != "after_pass_end"} for r in rows]
    script = {**script, "long_steps": {**record, "steps": bare, "passes": None}}
    long_steps.long_facts(g, SimpleNamespace(script=script, warmup=trace.warmup))
    assert g["long_how"] == "2 steps of the run, too few to show a period, each took"


def test_a_callbacks_epoch_end_is_timed_and_named_in_the_boundary_it_costs() -> None:
    """A fit of 20-batch epochs checkpointing each epoch (28-39 ms of a ~250 ms epoch, a
    CSVLogger's 0.07 ms, without the profiler): the boundary read "the rest is the next
    epoch's set-up" and the fix named TensorBoard and CSVLogger."""
    from types import SimpleNamespace

    from profiler.capture.script.detect import _time_epoch_end
    from profiler.diagnoses import performance

    class Checkpoint:
        def on_epoch_end(self, epoch, logs=None):
            return epoch

    class FakeClock:
        t = 0

        def __call__(self) -> int:
            self.t += 30_000_000
            return self.t

    fit: dict = {}
    d = SimpleNamespace(active="", clock=FakeClock(), facts=SimpleNamespace(fit=fit))
    cb = Checkpoint()
    _time_epoch_end(cb, d)
    _time_epoch_end(cb, d)  # once per instance
    assert cb.on_epoch_end(3) == 3
    d.active = "lines"
    cb.on_epoch_end(4)
    assert fit["epoch_ends"] == [["Checkpoint", 30.0, False], ["Checkpoint", 30.0, True]]

    ends = [["ModelCheckpoint", 120.0, False], ["CSVLogger", 0.2, False]]
    ends += [["ModelCheckpoint", 31.0, False], ["CSVLogger", 0.07, False]] * 3
    ends += [["ModelCheckpoint", 900.0, True]]
    fit = {"epochs": 60, "calls": 1, "callbacks": ["ModelCheckpoint", "CSVLogger"],
           "validation": True, "steps_per_epoch": 20, "epoch_ends": ends,
           "validations_ns": [200_000_000] + [68_000_000] * 5}  # fmt: skip
    # The first and the altered left out: the medians as written.
    assert performance.epoch_end_ms(fit) == {"ModelCheckpoint": 31.0, "CSVLogger": 0.07}
    epochs = SimpleNamespace(excess_ns=170_000_000, share=0.6, low_share=0.5,
                             steps_per_epoch=20, boundaries=19, clean=3)  # fmt: skip
    att = SimpleNamespace(reference_ns=4_000_000)
    f: dict = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), SimpleNamespace(
        epochs=epochs, attribution=att))  # fmt: skip
    assert "ModelCheckpoint's epoch end, timed: 31,000 µs; the rest, not timed" in f["epoch_what"]
    assert "CSVLogger's epoch end" not in f["epoch_what"]
    assert (
        "ModelCheckpoint (31.0 ms an epoch, timed), CSVLogger (0.1 ms an epoch" in (f["epoch_work"])
    )
    assert "(ModelCheckpoint: every few epochs" in f["epoch_fix"]
    assert "CSVLogger" not in f["epoch_fix"]


def test_the_validation_fix_leads_where_it_outweighs_tensorboards_timed_histograms() -> None:
    """A callbacks-heavy fit (TensorBoard(histogram_freq=1), ModelCheckpoint, EarlyStopping;
    20-batch epochs): validation 310 ms of a 600 ms boundary, TensorBoard's epoch end 26 ms.
    It was told histogram_freq=0 first, which saved nothing measurable without the profiler."""
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    cbs = ["TensorBoard", "ModelCheckpoint", "EarlyStopping"]
    ends = [[c, ms, False] for c, ms in zip(cbs, (25.6, 20.9, 0.4), strict=True)] * 4
    fit = {"epochs": 20, "calls": 1, "callbacks": cbs, "histogram_freq": 1,
           "validation": True, "steps_per_epoch": 20, "epoch_ends": ends, "x_kind": "arrays",
           "validations_ns": [900_000_000] + [310_000_000] * 4}  # fmt: skip
    epochs = SimpleNamespace(excess_ns=600_000_000, share=0.6, low_share=0.5,
                             steps_per_epoch=20, boundaries=5, clean=2)  # fmt: skip
    wa = SimpleNamespace(epochs=epochs, attribution=SimpleNamespace(reference_ns=18_000_000))
    f: dict = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), wa)
    fixes = f["epoch_fix"].split("; ")
    assert fixes[0].startswith("validate on fewer batches (validation_steps)"), fixes
    assert fixes[1].startswith("TensorBoard(histogram_freq=1) writes a histogram"), fixes
    # Arrays: the longer epochs need the data repeated (fit stops where it ends).
    assert "repeated with .repeat(): fit stops where the data ends" in fixes[-1], fixes
    # Every boundary instrumented: the validation and the callbacks' epoch ends, each timed as
    # written, are the boundary's cost (the validation alone read 23% where the boundaries took
    # 46-64% without the profiler).
    f = {}
    from profiler.analysis.stats import EpochCost

    every = EpochCost(20, 5, 600_000_000, 18_000_000, 0.62, 0.55, clean=0)
    wa_all = SimpleNamespace(epochs=every, attribution=wa.attribution)
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), wa_all)
    assert f["epoch_excess_us"] == pytest.approx(310_000 + 46_900), f
    assert f["epoch_what"].startswith(
        "every epoch's validation and epoch-end callbacks take 356,900 µs (the callbacks' epoch "
        "ends 46,900 µs, timed as written; the validation 310,000 µs"
    ), f["epoch_what"]
    # Where TensorBoard's epoch end is the larger, or no validation was timed, it leads.
    slow_tb = [[c, ms, False] for c, ms in zip(cbs, (400.0, 20.9, 0.4), strict=True)] * 4
    f = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": {**fit, "epoch_ends": slow_tb}}), wa)
    assert f["epoch_fix"].startswith("TensorBoard(histogram_freq=1)"), f["epoch_fix"]


def test_a_shuffle_after_a_map_is_named_at_the_epochs_start_with_its_fix() -> None:
    """6,000 JPEG records decoded by a map, then shuffle(10000), fit for 4 epochs: each epoch's
    first batch waited ~1 s for the buffer (17% of the epoch without the profiler, 0.04 s
    with the records shuffled before the map); the answer was "compute-bound"."""
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    stages = [
        {"kind": "from_tensor_slices"},
        {"kind": "map", "function": "parse (t.py:3)"},
        {"kind": "shuffle", "detail": "10000"},
        {"kind": "batch", "detail": "32"},
    ]
    pipe = {"iterations": 8, "stages": stages}
    script = {"pipelines": [pipe], "path": "/home/u/t.py"}
    what, fix = performance._shuffle_refill(script)
    assert what.startswith("the shuffle(10000) buffer, refilled through the map at each epoch")
    assert fix.startswith("shuffle before the map") and ".map(...).cache().shuffle(10000)" in fix
    # A cache between the map and the shuffle, or the shuffle before the map: nothing to say.
    cached = [*stages[:2], {"kind": "cache"}, *stages[2:]]
    assert performance._shuffle_refill({**script, "pipelines": [{"stages": cached}]}) is None
    first = [stages[0], stages[2], stages[1], stages[3]]
    assert performance._shuffle_refill({**script, "pipelines": [{"stages": first}]}) is None
    # A library's map (timeseries_dataset_from_array's windows, then its shuffle(256)), or a
    # small buffer: nothing to say.
    assert performance._shuffle_refill({**script, "path": "/home/u/other.py"}) is None
    small = [stages[0], stages[1], {"kind": "shuffle", "detail": "256"}, stages[3]]
    assert performance._shuffle_refill({**script, "pipelines": [{"stages": small}]}) is None
    # A whole data set's elements shuffled, no map (TensorFlow's structured-data tutorial,
    # shuffle(len(dataframe)): 61 ms to each epoch's first batch, 28 ms shuffling indices).
    rows_only = [stages[0], {"kind": "shuffle", "detail": "9229"}, stages[3]]
    what, fix = performance._shuffle_refill({**script, "pipelines": [{"stages": rows_only}]})
    assert what.startswith("the shuffle(9,229) buffer of the dataset's elements, filled again")
    assert fix.startswith("shuffle indices, not the elements: tf.data.Dataset.range(n)")
    few = [stages[0], {"kind": "shuffle", "detail": "2000"}, stages[3]]
    assert performance._shuffle_refill({**script, "pipelines": [{"stages": few}]}) is None
    # In the boundary's finding, from the long steps outside the windows.
    # One boundary outside the windows (the others in the what-ifs' steps) is enough at 30x.
    rows = [{"step": 564, "us": 1_000_000.0, "median_us": 33_000.0, "phase": ""}]
    fit = {"epochs": 4, "calls": 1, "callbacks": [], "steps_per_epoch": 188, "first_step": 0,
           "x_kind": "dataset"}  # fmt: skip
    wa = SimpleNamespace(epochs=None, attribution=SimpleNamespace(reference_ns=33_000_000))
    f: dict = {}
    trace = SimpleNamespace(script={**script, "fit": fit, "long_steps": {"steps": rows}})
    performance._epoch_facts(f, trace, wa)
    assert f["epoch_work"].startswith("the shuffle(10000) buffer, refilled"), f["epoch_work"]
    assert f["epoch_fix"].startswith("shuffle before the map"), f["epoch_fix"]
    assert 13 < f["epoch_share_pct"] < 15, f
    assert "(one epoch boundary outside the instrumented windows" in f["epoch_what"]
    rule = next(r for r in performance.RULES if r.id == "per_epoch_cost")
    assert rule.when({**f, "epoch_boundaries": 1})


def test_a_fit_per_iteration_with_one_boundary_in_the_windows_is_costed_from_the_long_steps():
    """Ten fit(epochs=1) calls each followed by model.evaluate (~0.34 s against a 2.6 s epoch
    without the profiler): one boundary fell in the windows, so the boundaries after them,
    among the run's long steps at the calls' 63-batch period, cost the epochs, their lower
    half (a phase's after-effects made two 2.7 s); the evaluate calls' median is quoted."""
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    step_ns = 30_000_000.0

    def row(step: int, us: float, phase: str = "") -> dict:
        return {"step": step, "us": us, "median_us": 30_000.0, "phase": phase}

    rows = [
        row(37, 300_000.0, "sampled"),
        row(63, 500_000.0),
        row(126, 530_000.0),
        row(189, 2_700_000.0),
        row(252, 2_660_000.0),
        row(300, 210_000.0),
    ]
    fit = {"epochs": 1, "calls": 10, "steps_per_epoch": 63, "first_step": 0, "callbacks": []}
    script = {"fit": fit, "long_steps": {"steps": rows}}
    cost = performance._long_boundaries(script, step_ns)
    # Step 63 (the first boundary) and the off-period and sampled ones are left out.
    assert cost is not None and cost.boundaries == 3
    assert cost.excess_ns == pytest.approx((530_000 / 30_000 - 1) * step_ns, rel=1e-6)
    calls = {
        "evaluate": {
            "calls": 10,
            "ms": 16_347.0,
            "median_ms": 590.0,
            "samples": 20_000,
            "sized": 10,
        }
    }
    f: dict = {}
    wa = SimpleNamespace(epochs=None, attribution=SimpleNamespace(reference_ns=step_ns))
    performance._epoch_facts(f, SimpleNamespace(script={**script, "keras_calls": calls}), wa)
    assert f["epoch_boundaries"] == 3 and "the lower half's median of 3 fit call" in f["epoch_what"]
    assert f["epoch_work"].startswith("model.evaluate, called 10 times (590 ms the median call")
    assert 20 < f["epoch_share_pct"] < 25
    # One fit of many epochs with evaluate before and after it (the transfer-learning
    # tutorial's): those calls are not at its epoch boundaries (a callback's would be inside
    # fit, not counted).
    one = {**fit, "calls": 1, "epochs": 10, "validation": True}
    f = {}
    performance._epoch_facts(
        f, SimpleNamespace(script={**script, "fit": one, "keras_calls": calls}), wa
    )
    assert "evaluate" not in f["epoch_work"] and "evaluate call" not in f["epoch_fix"]
    # One such boundary is costed alone only far beyond a preemption (10x the steps around it
    # and 100 ms more): 530 ms against 30 ms steps is; 90 ms is not.
    one = performance._long_boundaries({**script, "long_steps": {"steps": rows[:3]}}, step_ns)
    assert one is not None and one.boundaries == 1
    short = [*rows[:2], row(126, 90_000.0)]
    assert performance._long_boundaries({**script, "long_steps": {"steps": short}}, step_ns) is None
    # A fit's end is no boundary: the text generation tutorial's 2-epoch fit of 39 batches,
    # then 300 one-character tf.function calls (steps too, 0.9 ms): its last batch, 373 ms
    # against them, read "every epoch's first batch takes 203 s more".
    gen = {**fit, "calls": 1, "epochs": 2, "steps_per_epoch": 39, "total_steps": 78}
    after = [{"step": 78, "us": 372_627.3, "median_us": 888.4, "phase": ""}]
    gen_script = {"fit": gen, "long_steps": {"steps": after}}
    assert performance._long_boundaries(gen_script, 485_125_000.0) is None
    inside = [{"step": 117, "us": 2_000_000.0, "median_us": 100_000.0, "phase": ""}]
    longer = {"fit": {**gen, "epochs": 4, "total_steps": 156}, "long_steps": {"steps": inside}}
    assert performance._long_boundaries(longer, 485_125_000.0) is not None


def test_epoch_boundaries_all_instrumented_take_the_validations_lower_half_where_less():
    """A hand-written RNN's 50 ms validation beside a busy process: 250-680 ms in the
    instrumented windows, 49-54 ms in the what-ifs' blocks, 603 ms the one as written after
    them; the 4 boundaries in the windows read 322 ms and "54% of the training time"."""
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    ms = 1_000_000
    vals = [338, 86, 269, 285, 249, 676, 519, 279, 605, 188, 54, 52, 182, 49, 603]
    fit = {
        "epochs": 15,
        "calls": 1,
        "steps_per_epoch": 125,
        "validation": True,
        "callbacks": [],
        "validations_ns": [v * ms for v in vals],
        "validations_altered": list(range(1, 14)),
    }
    from profiler.analysis import stats

    epochs = stats.EpochCost(125, 4, 322 * ms, 2_192_000, 0.54, 0.4, 0)
    wa = SimpleNamespace(epochs=epochs, attribution=SimpleNamespace(reference_ns=2_192_000))
    f: dict = {}
    performance._epoch_facts(f, SimpleNamespace(script={"fit": fit}), wa)
    # The lower half of the 14 after the first: 49, 52, 54, 86, 182, 188, 249 -> 86 ms.
    assert f["epoch_excess_us"] == pytest.approx(86_000)
    assert "the lower half's median of those after the first" in f["epoch_what"]
    assert 20 < f["epoch_share_pct"] < 30


def test_periodic_slow_steps_whose_line_trains_the_model_are_not_told_to_run_it_less_often():
    # Gradient accumulation (StackOverflow's "accumulate gradients in TF2", eager): the update
    # every 4 micro-batches is the training's, 13.5 ms eagerly and 0.9 ms in a tf.function
    # without the profiler; it was told "run it less often ... a step's own cost does not
    # change it".
    from profiler.diagnoses import performance

    fix = performance._slow_fix("optimizer.apply_gradients(zip(accum, vars))", 4, "tf2")
    assert fix.startswith("it updates the model once every 4 steps (accumulated gradients)")
    assert "in a tf.function" in fix and "less often" in fix
    assert "tf.function" not in performance._slow_fix("opt.apply_gradients(g)", 4, "numpy")
    other = performance._slow_fix("acc = evaluate(model, x_test)", 10, "tf2")
    assert other.startswith("run it less often, on fewer samples")


def test_a_compute_bound_finding_a_what_if_ran_faster_than_its_kernels_is_refuted():
    # The basic text classification tutorial: "compute 73% (3,602 µs of kernels), little
    # overhead to remove", while fit with 16 batches a call ran 2,686 µs a step; without the
    # profiler that saved 1.4 ms a batch.
    from types import SimpleNamespace

    from profiler.diagnoses import performance
    from profiler.diagnoses.engine import Diagnosis

    d = Diagnosis("compute_bound", "workload", "t.py", "t.py is compute-bound", "less arithmetic")
    spe = SimpleNamespace(
        saves=True, variant_us=2_686.0, baseline_us=4_973.0, measured_us=2_287.0,
        interval_us=(1_298.0, 3_276.0), predicted_us=1_900.0, verdict="holds",
        title="fit running 16 batches per train-function call", resolution_us=None,
    )  # fmt: skip
    f = {"compute_us": 3_602.0, "step_us": 4_934.0}
    fix = performance._faster_than_kernels(d, f, {"keras_steps_16": spe})
    assert fix is not None and fix.startswith(
        "Not the advice here: with fit running 16 batches per train-function call the whole "
        "step measured 2,686 µs, 54% of the step as written beside it (4,973 µs), less than "
        "the 73% of the step the framework phase read as kernels (3,602 µs)"
    )
    # Within the margin, or a what-if that saved nothing: the finding stands.
    close = SimpleNamespace(**{**vars(spe), "variant_us": 3_300.0})
    assert performance._faster_than_kernels(d, f, {"keras_jit": close}) is None
    none = SimpleNamespace(**{**vars(spe), "saves": False})
    assert performance._faster_than_kernels(d, f, {"k": none}) is None
    # Compared as shares of the blocks beside it, not with kernels traced in a slower window:
    # a 1D convnet beside a busy process, 95% kernels (118 ms traced, a 124 ms step), its
    # what-if blocks 75 ms as written and 71 ms with the fix, is not refuted.
    conv = SimpleNamespace(**{**vars(spe), "variant_us": 71_000.0, "baseline_us": 75_000.0})
    slow = {"compute_us": 118_000.0, "step_us": 124_000.0}
    assert performance._faster_than_kernels(d, slow, {"keras_steps_4": conv}) is None
    # Without the step's time, the kernels' own figure (an older record).
    assert performance._faster_than_kernels(d, {"compute_us": 118_000.0}, {"k": conv})
    # A fix that leaves the kernels as they are saving a fifth of the step or more: there was
    # overhead to remove (a recommender beside a busy process: steps_per_execution=16 saved
    # 39% of its step, and the finding read "little overhead to remove ... mixed_bfloat16").
    busy = SimpleNamespace(**{**vars(spe), "variant_us": 3_040.0, "baseline_us": 4_670.0,
                              "measured_us": 1_830.0})  # fmt: skip
    fix = performance._faster_than_kernels(
        d, {"compute_us": 2_275.0, "step_us": 4_670.0}, {"keras_steps_16": busy}
    )
    assert (
        fix is not None and "which leaves the kernels as they are, measured 39% of the step" in fix
    )
    # XLA's saving is the kernels' own: it shows no overhead; a tenth of the step does not.
    assert performance._faster_than_kernels(d, {"compute_us": 2_275.0}, {"keras_jit": busy}) is None
    small = SimpleNamespace(**{**vars(busy), "measured_us": 467.0, "variant_us": 4_203.0})
    assert performance._faster_than_kernels(d, {"compute_us": 2_275.0}, {"k": small}) is None


def test_a_fix_naming_xla_says_where_the_loop_compiled_with_xla_raised() -> None:
    # A compute-bound loop whose ops XLA cannot compile was still told "XLA with
    # jit_compile=True ... try it on this loop", its XLA what-if having failed.
    from types import SimpleNamespace

    from profiler.diagnoses import performance
    from profiler.diagnoses.engine import Diagnosis

    d = Diagnosis(
        "compute_bound", "workload", "t.py", "t.py is compute-bound", performance.COMPUTE_FIX
    )
    failed = SimpleNamespace(status="failed", error="InvalidArgumentError: unsupported op.")
    out = performance._xla_failed(d, {"keras_jit": failed})
    assert out.fix.endswith(
        "XLA was tried on your loop and failed (InvalidArgumentError: unsupported op): "
        "not a way here."
    )
    # A measured XLA what-if, or a rule whose fix names no XLA, is left as it was.
    ok = SimpleNamespace(status="ok", error="")
    assert performance._xla_failed(d, {"keras_jit": ok}) is d
    other = Diagnosis("input_bound", "workload", "t.py", "waits", "prefetch")
    assert performance._xla_failed(other, {"keras_jit": failed}) is other
    # Keras refusing XLA for the model (augmentation layers inside it): said the same way.
    why = "Keras does not compile this model with XLA (its layers RandomFlip do not support XLA)"
    said = performance._xla_failed(d, {}, f"{why}: jit_compile=True runs without it")
    assert said.fix.endswith(f"{why}: jit_compile=True runs without it: not a way here.")


def test_long_steps_left_out_are_no_positions_of_their_period() -> None:
    """A TF1 loop saving a checkpoint every 100 iterations (110 session.run calls; 0.6-1.1 s a
    save against 30 ms steps, 12-14% of the loop without the profiler): its save at step 3
    sat next to the timed window's start and was left out; counted as a position of the
    period it read "3 of 4", short of one, and four long steps are too many for "a few"."""
    from types import SimpleNamespace

    from profiler.diagnoses import long_steps

    rows = [{"step": s, "us": us, "median_us": 30_300.0, "phase": ""}
            for s, us in ((113, 888_506.4), (223, 846_627.8), (333, 845_926.2),
                          (441, 2_981_354.3))]  # fmt: skip
    spans = [{"phase": "timed", "from": 3, "to": 13}, {"phase": "whatif", "from": 66, "to": 88}]
    record = {"steps": rows, "left_out": 58, "spans": spans,
              "left": [[3, 5], [12, 15], [27, 30], [40, 43], [55, 58], [65, 89]]}  # fmt: skip
    script = {"long_steps": record, "steps": 442, "functions": []}
    trace = SimpleNamespace(script=script, warmup=SimpleNamespace(n_steps=3))
    f = {"step_us": 55_453.7, "framework": "tf1"}
    long_steps.long_facts(f, trace)
    assert f["long_period"] == 110 and f["long_count"] == 3
    assert f["long_how"] == "one step in every 110 of the run took"
    assert 15 < f["long_pct"] < 25, f["long_pct"]
    # A record of an earlier version (no ``left``): step 3 is a position, no period is found.
    g = {"step_us": 55_453.7, "framework": "tf1"}
    old = {k: v for k, v in record.items() if k != "left"}
    long_steps.long_facts(
        g, SimpleNamespace(script={**script, "long_steps": old}, warmup=trace.warmup)
    )
    assert "long_period" not in g
    # Among as many very long steps off the period (a busy machine's preemptions line up
    # now and then): no period.
    noise = [
        {"step": s, "us": 400_000.0, "median_us": 30_300.0, "phase": ""} for s in (50, 60, 95, 150)
    ]
    h = {"step_us": 55_453.7, "framework": "tf1"}
    busy = {**record, "steps": sorted([*rows, *noise], key=lambda r: r["step"])}
    long_steps.long_facts(
        h, SimpleNamespace(script={**script, "long_steps": busy}, warmup=trace.warmup)
    )
    assert h.get("long_period") != 110


def test_a_boundary_its_callbacks_hold_little_of_leaves_the_rest_untimed_and_the_strategy():
    # The distributed-training tutorial's fit under a one-device MirroredStrategy: a 10.3 s
    # boundary, its four callbacks' epoch ends 35 ms together, read "the callbacks ... cost 51%
    # of the training time"; without the profiler its boundaries took 0.1-29 s, 0.03-0.10 s
    # without the strategy.
    from profiler.diagnoses import performance

    ends = {"TensorBoard": 1.9, "ModelCheckpoint": 31.4, "PrintLR": 0.6}
    fit = {"strategy": "MirroredStrategy", "strategy_replicas": 1}
    work = ["the callbacks TensorBoard, ModelCheckpoint, PrintLR"]
    got = performance._untimed_rest(fit, work, list(ends), ends, 10_317_847_000.0)
    assert got is not None
    assert got[0] == (
        " (their epoch ends 33.9 ms of the 10,317.8 ms, timed as written) and, not timed apart, "
        "fit's own epoch end and the next epoch's set-up under its MirroredStrategy (1 replica)"
    )
    assert got[1].startswith("with one device, no strategy: a MirroredStrategy over one replica")
    # Two replicas: named, no fix; no strategy: neither.
    two = performance._untimed_rest({**fit, "strategy_replicas": 2}, work, list(ends), ends, 1e10)
    assert two is not None and two[0].endswith("(2 replicas)") and two[1] == ""
    plain = performance._untimed_rest({}, work, list(ends), ends, 1e10)
    assert plain is not None and plain[0].endswith("the next epoch's set-up") and plain[1] == ""
    # Callbacks timed at most of the boundary, or one not timed: nothing added.
    assert performance._untimed_rest(fit, work, list(ends), ends, 50_000_000.0) is None
    assert performance._untimed_rest(fit, work, [*ends, "Custom"], ends, 1e10) is None


def test_long_steps_do_not_tell_a_compiled_evaluation_step_to_be_compiled() -> None:
    # Keras's custom training loop guide: its validation each epoch runs an @tf.function
    # test_step already; "an evaluation's step compiled with tf.function" could not help.
    from types import SimpleNamespace

    from profiler.diagnoses import long_steps

    rows = [{"step": s, "us": 400_000.0, "median_us": 1_000.0, "phase": ""} for s in (3126, 6252)]
    record = {"steps": rows, "left_out": 0, "spans": []}

    def cheaper(functions: list[dict]) -> str:
        script = {"long_steps": record, "steps": 7815, "functions": functions}
        f = {"step_us": 1_000.0, "framework": "tf2"}
        long_steps.long_facts(f, SimpleNamespace(script=script, warmup=SimpleNamespace(n_steps=3)))
        return f["long_cheaper"]

    assert cheaper([{"name": "train_step", "own": True}]).startswith(" (an evaluation's step")
    assert cheaper([{"name": "train_step", "own": True}, {"name": "test_step", "own": True}]) == ""


def test_a_traced_or_paused_step_is_no_miss_of_the_long_steps_period() -> None:
    # Keras's custom training loop guide: a validation after each 1,563-step epoch (0.3 s,
    # ~15% of an epoch without the profiler); the first epoch's end also retraced (a last
    # partial batch) and read "3 steps of the run, too few to show a period".
    from types import SimpleNamespace

    from profiler.diagnoses import long_steps

    rows = [
        {"step": 1562, "us": 153_765.4, "median_us": 854.9, "phase": "framework"},
        {"step": 1563, "us": 295_937.5, "median_us": 854.9, "phase": "framework"},
        {"step": 3126, "us": 189_488.8, "median_us": 1_029.5, "phase": "whatif"},
        {"step": 4689, "us": 189_567.8, "median_us": 849.0, "phase": ""},
        {"step": 6252, "us": 190_570.7, "median_us": 794.9, "phase": ""},
    ]
    record = {"steps": rows, "left_out": 600, "spans": [], "left": [[3246, 3594], [3938, 4114]]}
    functions = [{"name": "train_step", "own": True, "trace_steps": [1563]}]
    script = {"long_steps": record, "steps": 7815, "functions": functions}
    f = {"step_us": 865.0, "framework": "tf2"}
    long_steps.long_facts(f, SimpleNamespace(script=script, warmup=SimpleNamespace(n_steps=20)))
    assert f["long_period"] == 1563 and f["long_count"] == 3, f.get("long_how")
    assert 10 < f["long_pct"] < 16, f["long_pct"]
    # A position in the sampled (paused) window is no miss either.
    big = [{"step": s, "us": 400_000.0, "median_us": 1_000.0, "phase": ""} for s in (300, 500, 700)]
    observed = list(range(20, 800))
    assert long_steps._few_at_period(big, observed) == (None, [])
    assert long_steps._few_at_period(big, observed, frozenset(range(90, 120))) == (
        200,
        [300, 500, 700],
    )


def test_each_new_models_first_validation_is_left_out_of_the_epochs_cost() -> None:
    # The imbalanced-data tutorial fits four new models: each one's first validation traces
    # its test function (0.75-1.0 s against ~0.2 s later ones, beside a busy process).
    from profiler.diagnoses import performance

    ms = 1_000_000
    later = [200 * ms] * 6
    fit = {"steps_per_epoch": 23, "validations_ns": [900 * ms, *later[:3], 1000 * ms, *later[3:]]}
    with_firsts = performance._validations({**fit, "first_validations": [0, 4]}, 4_600_000.0)
    assert with_firsts is not None and with_firsts.boundaries == 6
    assert with_firsts.excess_ns == 200 * ms
    # A record without them: the run's first alone is left out, as before.
    old = performance._validations(fit, 4_600_000.0)
    assert old is not None and old.boundaries == 7


def test_one_validation_timed_as_written_after_the_first_is_a_recurring_cost() -> None:
    """Keras's transformer text classifier, 2 epochs: its second validation, 1.53 s against
    5.2 s of batches (~36% of the training time without the profiler), went unnamed: one
    boundary was taken for a possible one-off, though the first (the trace) was left out."""
    from profiler.diagnoses import performance

    f = {"label": "t.py", "name": "t.py", "step_us": 57_958.0, "epoch_share_pct": 22.0,
         "epoch_low_pct": 22.0, "epoch_boundaries": 1, "epoch_what": "w", "epoch_work": "v",
         "epoch_unit": "epoch", "steps_per_epoch": 94, "epoch_fix": "x",
         "epoch_cost_per_step_us": 16_327.0}  # fmt: skip
    rule = next(r for r in performance.RULES if r.id == "per_epoch_cost")
    assert not rule.when(f)  # one boundary, nothing said of it
    assert rule.when({**f, "epoch_one_timed": True})


@pytest.mark.parametrize("other_cpu_ms", [25.0, 400.0])
def test_a_generator_that_mostly_waits_costs_the_step_its_wait_and_is_told_to_run_in_parallel(
    other_cpu_ms: float,
) -> None:
    """The tf.data guide's generator sleeping 15 ms an element beside a 10 ms step: its PyFunc
    ran 14.8 ms of a 15.6 ms step on tf.data's thread, the step waited 4.2 ms; "about 9,498 µs
    of each 14,153 µs step" took the rest as sharing the cores, but the threads beside the step
    used 0.8 ms of CPU a step. Without the profiler its sleep removed took 4.4 ms off the step,
    and the step's own 10 ms removed took nothing off (the generator sets the pace)."""
    from types import SimpleNamespace as NS

    from profiler.diagnoses import input as input_rules
    from profiler.diagnoses import waiting

    steps = 31
    table = NS(steps=19, rows=[NS(kernel="PyFunc", input_thread=True, total_ns=281_255_042)])
    window = NS(n_steps=steps, durations_ns=lambda: [15_600_000] * 19)
    cpu = NS(other_cpu_ns=int(other_cpu_ms * 1e6), usable_cpus=2, cpu_count=2)
    data = {"framework": NS(xplane_op_table=table, op_table=None), "timed": cpu}
    phases = {"framework": NS(window=window), "timed": NS(window=window)}
    trace = NS(data=data.get, phase=phases.get)
    f = {"label": "naive.py", "step_us": 14_153.0, "input_us": 4_194.0, "input_pct": 29.6}
    input_rules.generator_facts(f, trace)
    assert f["gen_cpu_us"] == pytest.approx(14_803, rel=0.01)
    assert f["gen_paces"]
    if other_cpu_ms < 100:  # 0.8 ms a step: the generator waits
        assert f["gen_us"] == pytest.approx(4_194 + 806 / 2, rel=0.01)
        assert f["gen_fix"] == input_rules.GEN_WAITS_FIX and "mostly waiting" in f["gen_beside"]
    else:  # 12.9 ms a step: it computes, beside the step's work, on its cores
        assert f["gen_us"] == pytest.approx(4_194 + (14_803 - 4_194) / 2, rel=0.01)
        assert f["gen_fix"] == input_rules.GEN_FIX
    # The step's own sleep then saves nothing: the step would wait for the batches instead.
    f.update(sleep_share=0.7, sleep_us=9_754.0, gen_python="ArtificialDataset._generator")
    waiting._sleep_gain(f)
    assert f["sleep_gain_us"] == 0.0 and "would not be faster" in f["sleep_gain"]
    # Nor where the step waits for its input beside the sleep (tf.data makes the next batch
    # while it sleeps: the data performance guide's loop saved nothing of its median step
    # without its sleep, without the profiler).
    f["gen_paces"] = False
    waiting._sleep_gain(f)
    assert (
        f["sleep_gain_us"] == 0.0
        and "while its input paces it: it waits 4,194 µs" in (f["sleep_gain"])
    )
    # A step its input does not pace: the sleep is its saving.
    f["input_pct"] = 5.0
    waiting._sleep_gain(f)
    assert f["sleep_gain_us"] == 9_754.0 and f["sleep_gain"].endswith("about 9,754 µs")


def test_several_models_each_fit_once_are_not_a_loop_of_fit_calls() -> None:
    # Keras's distillation example fits a teacher, a distiller and a student once each: their
    # boundaries read "a model.compile before each of the 3 fit calls ... compile once,
    # before the loop ... fit(epochs=3)".
    from types import SimpleNamespace

    from profiler.analysis.stats import EpochCost
    from profiler.diagnoses.performance import _epoch_facts

    epochs = EpochCost(
        steps_per_epoch=50,
        boundaries=2,
        excess_ns=2_000_000_000,
        batch_ns=100_000_000,
        share=0.3,
        low_share=0.3,
        clean=2,
    )
    wa = SimpleNamespace(epochs=epochs, attribution=None)
    for models, fired in ((3, False), (1, True)):
        fit = {"calls": 3, "models": models, "epochs": 1, "steps_per_epoch": 50}
        trace = SimpleNamespace(script={"fit": fit, "keras_calls": {}}, phase=lambda _n: None)
        f: dict = {"step_us": 100_000.0}
        _epoch_facts(f, trace, wa)
        assert ("epoch_what" in f) is fired, (models, f)
    # Fewer validation batches is no fix where it validates on one (the segmentation tutorial's
    # validation_steps=1).
    for steps, offered in ((1, False), (None, True), (5, True)):
        fit = {"calls": 1, "epochs": 3, "steps_per_epoch": 50, "validation": True,
               "validation_steps": steps}  # fmt: skip
        trace = SimpleNamespace(script={"fit": fit, "keras_calls": {}}, phase=lambda _n: None)
        f = {"step_us": 100_000.0}
        _epoch_facts(f, trace, wa)
        assert ("validation_steps" in f["epoch_fix"]) is offered, (steps, f["epoch_fix"])
        assert "validate less often (fit(validation_freq=k))" in f["epoch_fix"]


def test_steps_per_execution_advice_says_what_it_does_to_the_scripts_batch_callbacks() -> None:
    # A callback evaluating every 20 batches: with steps_per_execution=k Keras calls it once
    # every k batches, and its count of batches would change.
    from profiler.diagnoses.engine import Diagnosis
    from profiler.diagnoses.performance import _measured_fix

    d = Diagnosis("overhead_bound_keras", "workload", "s.py", "m", "Run several batches.")
    note = " With steps_per_execution=k, Keras calls EvalEveryN's batch methods once every k"
    got = _measured_fix(d, {}, {"batch_callbacks_note": note}, "")
    assert got.fix == "Run several batches." + note
    assert _measured_fix(d, {}, {"batch_callbacks_note": ""}, "").fix == "Run several batches."
    other = Diagnosis("compute_bound", "workload", "s.py", "m", "Less arithmetic.")
    assert _measured_fix(other, {}, {"batch_callbacks_note": note}, "").fix == "Less arithmetic."


def test_debugging_and_thread_switches_left_in_a_script_are_named_before_generic_advice() -> None:
    # TensorFlow's debugger guide's MLP with enable_check_numerics() left on: 27 ms a step, 7
    # ms without (without the profiler), read "the graph executor's cost per op ... XLA". A
    # reproducibility recipe's set_intra_op_parallelism_threads(1) on 2 cores: fits 1.4-2.6x
    # slower, read "compute-bound ... more cores".
    from types import SimpleNamespace

    from profiler.diagnoses import performance
    from profiler.diagnoses.engine import evaluate

    rules_of = [r for r in performance.RULES
                if r.id in ("check_numerics", "tf_threads_limited", "compute_bound",
                            "compute_bound_peak")]  # fmt: skip
    base = {"label": "s.py", "name": "s", "step_us": 16_000.0, "overhead_us": 12_000.0,
            "overhead_pct": 75.0, "compute_us": 4_000.0, "compute_pct": 25.0}  # fmt: skip
    checked = {**base, "check_numerics": True, "debug_kernels_us": 900.0}
    performance._numerics_facts(checked)
    (d,) = [d for d in evaluate(rules_of, "workload", [checked]) if d.rule == "check_numerics"]
    assert "tf.debugging.enable_check_numerics() on" in d.message and d.cost_us == 12_900.0
    assert "among the 12,000 µs beside the kernels and 900 µs of kernels of its own, 81%" in (
        d.message
    )
    assert "disable_check_numerics" in d.fix
    assert not [d for d in evaluate(rules_of, "workload", [base]) if d.rule == "check_numerics"]

    f: dict = {"compute_us": 234_000.0}
    script = {"tf_threads": {"intra": 1, "inter": 1}}
    trace = SimpleNamespace(data=lambda _name: SimpleNamespace(usable_cpus=2))
    performance._switch_facts(f, script, trace)
    assert (f["tf_intra"], f["tf_cores"], f["tf_threads_us"]) == (1, 2, 117_000.0)
    bound = {**base, **f, "step_us": 252_000.0, "compute_pct": 93.0, "top_kernels": "Conv2D",
             "compute_fix": "more cores", "arithmetic_share": 1.0}  # fmt: skip
    rules = {d.rule: d for d in evaluate(rules_of, "workload", [bound])}
    assert "tf_threads_limited" in rules and "compute_bound" not in rules
    assert "set_intra_op_parallelism_threads(1)" in rules["tf_threads_limited"].fix
    # The default pools (0: the cores) or one core: nothing to say.
    for threads, cores in (({"intra": 0, "inter": 0}, 2), ({"intra": 1, "inter": 1}, 1)):
        g: dict = {"compute_us": 234_000.0}
        one = SimpleNamespace(data=lambda _name, c=cores: SimpleNamespace(usable_cpus=c))
        performance._switch_facts(g, {"tf_threads": threads}, one)
        assert "tf_intra" not in g


def test_epoch_boundaries_shifted_by_a_what_if_are_still_found() -> None:
    # A CSV tutorial's fit: after the what-ifs its boundaries fell at 5601, 6401, ... against
    # 800-batch epochs (a block's count shifted by one), 1.3 s each, and none was counted.
    from profiler.diagnoses.performance import _long_boundaries

    def script(steps: list[int]) -> dict:
        rows = [{"step": s, "us": 1_300_000.0, "median_us": 1_000.0, "phase": ""} for s in steps]
        fit = {"steps_per_epoch": 800, "first_step": 0, "calls": 1, "total_steps": 16_000}
        return {"fit": fit, "long_steps": {"steps": rows}}

    shifted = _long_boundaries(script([5601, 6401, 7201, 9999]), 1_000_000.0)
    assert shifted is not None and shifted.boundaries == 3
    exact = _long_boundaries(script([1600, 2400, 3333]), 1_000_000.0)
    assert exact is not None and exact.boundaries == 2
    # One step at an odd place is no boundary.
    assert _long_boundaries(script([5601]), 1_000_000.0) is None


def test_per_op_advice_does_not_offer_xla_to_a_step_that_calls_python() -> None:
    from profiler.diagnoses import performance

    # TensorFlow's actor-critic tutorial: its CartPole step in tf.numpy_function; XLA raised
    # "Detected unsupported operations ... PyFunc" where the verdict led with it.
    f: dict = {"py_step_calls": "env_step (ac.py:110)"}
    performance._per_op_fix(f)
    assert f["per_op_fix"].startswith(
        "Fewer, larger ops: write the Python the step calls through tf.py_function "
        "(env_step (ac.py:110)) in TensorFlow ops, and XLA (jit_compile=True) can then fuse"
    )
    g: dict = {}
    performance._per_op_fix(g)
    assert g["per_op_fix"].startswith("Fewer, larger ops: XLA (jit_compile=True) fuses them")


def test_slow_steps_at_a_monitored_sessions_hooks_period_name_the_hooks() -> None:
    from profiler.diagnoses import performance

    hooks = [
        {"hook": "StopAtStepHook", "every_steps": None, "every_secs": None},
        {"hook": "LoggingTensorHook", "every_steps": 100, "every_secs": None},
        {"hook": "CheckpointSaverHook", "every_steps": 200, "every_secs": None},
        {"hook": "SummarySaverHook", "every_steps": 100, "every_secs": None},
    ]
    what, fix = performance._hooks_at(hooks, 100)  # type: ignore[misc]
    assert what == (
        "The MonitoredTrainingSession's hooks run every 100 steps (LoggingTensorHook, "
        "SummarySaverHook; CheckpointSaverHook every 200)"
    )
    assert fix.startswith(
        "run them less often: larger periods in LoggingTensorHook(every_n_iter=...) and "
        "MonitoredTrainingSession(save_checkpoint_steps=...) and "
        "MonitoredTrainingSession(save_summaries_steps=...)"
    ), fix
    # No hook at the period: the generic words.
    assert performance._hooks_at(hooks, 7) is None and performance._hooks_at([], 100) is None


def test_the_checkpoint_fix_names_only_the_settings_the_script_did_not_give() -> None:
    from profiler.diagnoses import performance

    # TF's distributed-training tutorial: ModelCheckpoint(save_weights_only=True) every epoch
    # was told to set save_weights_only=True.
    given = {"ckpt_weights_only": True, "ckpt_best_only": False, "ckpt_save_freq": "epoch"}
    assert performance._checkpoint_fix(given) == (
        "ModelCheckpoint: every few epochs (save_freq in batches), or save_best_only=True"
    )
    assert performance._checkpoint_fix({}) == performance.CALLBACK_FIX["ModelCheckpoint"]
    every = {"ckpt_weights_only": True, "ckpt_best_only": True, "ckpt_save_freq": 500}
    assert performance._checkpoint_fix(every) == "ModelCheckpoint: a larger save_freq"


def test_a_convolution_backprop_far_slower_than_its_forward_names_onednn() -> None:
    # Keras's WGAN-GP: Conv2DBackpropInput 80% of its step, its forward convolutions 3%; with
    # TF_ENABLE_ONEDNN_OPTS=1 its step ran 3.3-3.5x faster, without the profiler.
    from profiler.diagnoses import performance

    wgan = {"Conv2DBackpropInput": 0.80, "Conv2DBackpropFilter": 0.15, "Conv2D": 0.03}
    f: dict = {"compute_fix": "There is little overhead to remove."}
    performance._slow_backprop(f, wgan, False)
    assert f["compute_fix"].startswith("Run the script with TF_ENABLE_ONEDNN_OPTS=1")
    assert (
        "Conv2DBackpropInput takes 27x the forward convolutions' time (80% of the"
        in (f["compute_fix"])
    )
    assert f["compute_fix"].endswith("There is little overhead to remove.")
    # oneDNN on, or not read: nothing to add; nor on a VAE's kernels (backprop 2x its forward).
    for kernels, onednn in ((wgan, True), (wgan, None),
                            ({"Conv2DBackpropFilter": 0.48, "Conv2D": 0.22}, False)):  # fmt: skip
        g: dict = {"compute_fix": "x"}
        performance._slow_backprop(g, kernels, onednn)
        assert g["compute_fix"] == "x"


def test_new_models_of_one_architecture_are_named_and_models_of_their_own_are_not() -> None:
    """``model_per_fit``: a loop fitting a new model of one architecture per trial, its first
    batches 70% of the run, gets the reset fix; models of their own architectures (TF's
    overfitting tutorial compares four sizes) are the price of having them: no finding."""
    from types import SimpleNamespace

    from profiler.diagnoses import calls

    rows = [{"step": s, "us": 2_003_000.0, "median_us": 3_000.0} for s in (32, 64, 96, 128)]
    fit = {"models": 5, "calls": 5, "call_steps": [0, 32, 64, 96, 128], "call_arch": ["a"] * 5}
    script = {"fit": fit, "wall_s": 14.0, "steps": 160, "long_steps": {"steps": rows}}
    f: dict = {}
    calls.new_models_facts(f, SimpleNamespace(script=script))
    assert calls.new_models(f) and f["nm_each_s"] == pytest.approx(2.0)
    assert f["nm_s"] == pytest.approx(10.0) and round(f["nm_pct"]) == 71
    assert f["nm_fix"].startswith("The 5 models have one architecture: build and compile one")
    mixed = {**fit, "call_arch": ["a", "b", "c", "d", "e"]}
    f = {}
    calls.new_models_facts(f, SimpleNamespace(script={**script, "fit": mixed}))
    assert not calls.new_models(f) and "nm_fix" not in f
    # Not recorded (an older trace): said as a condition.
    f = {}
    calls.new_models_facts(f, SimpleNamespace(script={**script, "fit": {**fit, "call_arch": []}}))
    assert f["nm_fix"].startswith("Where the trials share one architecture, build")


def test_a_pass_end_costlier_than_the_step_after_it_is_the_boundary_named() -> None:
    """d2l's softmax regression: each epoch's last iteration (its iterable running out) took
    0.4-3.4 s without the profiler, the next epoch's first step ~0.4 s; the periodic search
    may pick either series, and the costlier, the pass's end, is named."""
    from profiler.diagnoses import long_steps

    end = {"us": 2_000_000.0, "median_us": 12_000.0, "pass_end": True}
    ends = [dict(end, step=235 * k - 1) for k in range(1, 9)]
    after = [{"step": 235 * k, "us": 400_000.0, "median_us": 12_000.0} for k in range(1, 10)]
    rows = ends + after
    picked = {235 * k for k in range(1, 10)}
    assert long_steps._pass_ends_before(rows, picked) == {235 * k - 1 for k in range(1, 9)}
    # The step after costlier: kept.
    cheap = [dict(r, us=100_000.0) for r in ends]
    assert long_steps._pass_ends_before(cheap + after, picked) == picked
    # Too few pass ends before them: kept.
    assert long_steps._pass_ends_before(ends[:3] + after, picked) == picked


def test_a_long_step_beside_a_trace_stays_less_the_traced_calls_time() -> None:
    # TensorFlow's distributed custom-training tutorial: 21.4 s between an epoch's last step and
    # the next (its distributed iterator's end, then its test loop: 0-24 s without the
    # profiler), where its test function's first call traced; left out whole as a trace, the
    # run's largest cost went unnamed.
    from types import SimpleNamespace

    from profiler.diagnoses import long_steps

    rows = [
        {"step": 199, "us": 21_370_954.3, "median_us": 45_024.2, "phase": ""},
        {"step": 399, "us": 2_824_037.5, "median_us": 88_471.5, "phase": ""},
    ]
    record = {"steps": rows, "left_out": 63, "spans": []}

    def facts(traced_ms: dict[str, float] | None) -> dict:
        fn = {"name": "distributed_test_step", "own": True, "trace_steps": [199]}
        fn["first_step"] = 199
        if traced_ms is not None:
            fn["traced_ms"] = traced_ms
        script = {"long_steps": record, "steps": 600, "functions": [fn]}
        f = {"step_us": 79_000.0, "framework": "tf2"}
        long_steps.long_facts(f, SimpleNamespace(script=script, warmup=SimpleNamespace(n_steps=3)))
        return f

    # Its traced calls took 2.1 s of the 21.3 s: the step stays, less them.
    kept = facts({"199": 2_100.0})
    assert kept.get("long_count") == 2, kept
    assert 20 < kept["long_pct"] < 45, kept["long_pct"]
    # Calls that traced for most of it: the trace's (the retracing and tracing findings').
    assert facts({"199": 20_000.0}).get("long_count") == 1
    # A record without the traced calls' times (an earlier capture): left out as before.
    assert facts(None).get("long_count") == 1


def test_a_step_compiled_with_xla_is_told_to_time_it_without_not_to_try_it() -> None:
    from profiler.diagnoses import performance

    on = performance._compute_fix(None, ["avx512_bf16"], False, "compile(jit_compile=True)")
    assert "compiles with XLA already (compile(jit_compile=True)): time it without" in on
    assert performance.XLA_CLAUSE not in on
    off = performance._compute_fix(None, ["avx512_bf16"], False)
    assert performance.XLA_CLAUSE in off and "already" not in off


def test_slow_steps_that_start_each_pass_over_the_loop_are_named_so() -> None:
    # TF's data performance guide: its naive pipeline's generator "opens a file" at each
    # 3-sample epoch's start, read "Something runs every 3 steps besides the training step".
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    rows = [{"step": s, "us": 87_000.0, "median_us": 16_700.0, "after_pass_end": True}
            for s in (29, 50, 59, 62, 65)]  # fmt: skip
    record = {"passes": {"ends": 392, "length": 3}, "steps": rows}
    trace = SimpleNamespace(script={"long_steps": record})
    assert performance._pass_starts(trace, 3)
    assert not performance._pass_starts(trace, 4)
    others = [{**r, "after_pass_end": False} for r in rows]
    assert not performance._pass_starts(SimpleNamespace(script={"long_steps": {
        **record, "steps": others}}), 3)  # fmt: skip


def test_a_rate_above_the_measured_peak_is_not_said_as_more_than_all_of_it() -> None:
    # Keras's style transfer: "112.9 GFLOP/s, 119% of this machine's 95 GFLOP/s float32
    # matmul" (the peak measured while other work ran); within PEAK_SLACK it is "about" it.
    from types import SimpleNamespace as NS

    from profiler.diagnoses import performance

    def said(flops: int) -> str:
        fw = NS(peak_gflops=95.0, flops_per_step=flops, median_ns=NS(kernels=300),
                xplane_op_table=None, op_table=None, full_trace=None)  # fmt: skip
        trace = NS(data={"framework": fw}.get, script={})
        f = {"step_us": 386_152.0, "compute_us": 380_375.0, "units_per_step": 1}
        performance._compute_facts(f, trace)
        return f.get("peak_said", "")

    assert said(42_948_649_188).startswith("about this machine's 95 GFLOP/s float32 matmul")
    assert said(30_000_000_000) == "83% of this machine's 95 GFLOP/s float32 matmul"
    # Far below the peak, the count missed work (Keras-GAN's DCGAN: 0.22 GFLOP counted of ~21
    # by hand): no rate is quoted.
    assert said(300_000_000) == ""

"""Keras calls that set up a data pipeline for a batch: ``predict`` (or ``evaluate``) called in
a loop on a sample or a few at a time, and ``fit`` called again and again on one batch each.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance``). ``call_facts`` reads what the script's detectors counted
(``script.keras_calls``: calls, their total time, the samples given) and the script's wall time
around its steps (``script.time``). The cost ranks with the per-step findings as the calls' time
spread over the training steps.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from profiler.diagnoses.engine import Rule

#: Methods whose per-call set-up a loop repeats, and what to do instead.
LOOPED = {
    "predict": "model.predict",
    "predict_on_batch": "model.predict_on_batch",
    "evaluate": "model.evaluate",
    "test_on_batch": "model.test_on_batch",
}
#: A loop: at least this many calls, of at most this many samples each on average (one batch
#: of predict's and evaluate's default batch size: the call's pipeline and callbacks are set up
#: for one batch; a GAN's generator.predict on 16 samples took 132 ms of a 165 ms iteration,
#: predict_on_batch made the iteration 5.5x faster, measured without the profiler).
MIN_CALLS = 20
MAX_SAMPLES = 32
#: The one-batch call without the per-call set-up, for each looped method.
ON_BATCH = {"predict": "model.predict_on_batch", "evaluate": "model.test_on_batch"}
#: ... that together take at least this share of the script's wall time.
MIN_SHARE_PCT = 10


#: model.compile calls from which a loop's new train functions (and their memory) are its own
#: cost: each compile makes a new optimizer and train function, traced at the next batch.
RECOMPILES = 3


def compiles(script: dict[str, Any]) -> int:
    """How many times the script called model.compile (``script.keras_calls``)."""
    return int(((script.get("keras_calls") or {}).get("compile") or {}).get("calls") or 0)


def call_facts(f: dict[str, Any], trace: Any) -> None:
    """The costliest looped Keras call: how often, on how many samples, for how long."""
    script = trace.script or {}
    wall = float(script.get("wall_s") or 0.0)
    steps = int(script.get("steps") or 0)
    best = None
    for name, c in (script.get("keras_calls") or {}).items():
        if name in LOOPED and c["calls"] and (best is None or c["ms"] > best[1]["ms"]):
            best = (name, c)
    if best is None or not wall:
        return
    name, c = best
    f["loop_call"] = LOOPED[name]
    f["loop_calls"] = c["calls"]
    f["loop_s"] = c["ms"] / 1e3
    f["loop_ms_per_call"] = c["ms"] / c["calls"]
    f["loop_pct"] = 100 * f["loop_s"] / wall
    f["script_s"] = wall
    f["loop_samples"] = c["samples"] / c["sized"] if c["sized"] else None
    if f["loop_samples"] is not None:
        n = f["loop_samples"]
        # A mean over calls of different sizes: 17.4, not 17.3967.
        f["loop_samples_text"] = (f"{n:,.0f}" if n == round(n) else f"{n:,.1f}") + (
            " sample" if n == 1 else " samples"
        )
    f["train_steps"] = steps
    span = (script.get("time") or {}).get("steps_s")
    # Less the calls made between the first step and the last (Keras's character LSTM calls
    # predict 120 times between its two fits: "its 186 training steps took 69.2 s", ~21 s
    # without the profiler, the calls counted twice).
    f["train_steps_s"] = (
        max(float(span) - float(c.get("in_steps_ms") or 0.0) / 1e3, 0.0)
        if span is not None
        else None
    )
    # The calls' time over the training steps: comparable with the per-step findings' costs.
    f["loop_cost_per_step_us"] = c["ms"] * 1e3 / max(steps, 1)
    # Those made once the steps had begun are inside them: a step's overhead beside its
    # kernels holds them, and they are not the step's per-call cost (a GAN's predict, 58% of
    # its loop measured without the profiler, read as train_on_batch's per-call overhead).
    inside = float(c.get("in_steps_ms") or 0.0) * 1e3 / max(steps, 1)
    f["loop_in_steps_us"] = inside
    if inside and f.get("overhead_us") is not None and f.get("step_us"):
        f["overhead_us"] = max(f["overhead_us"] - inside, 0.0)
        f["overhead_pct"] = 100 * f["overhead_us"] / f["step_us"]
    predicts = name.startswith("predict")
    batch = f"{ON_BATCH[name]}(x)" if name in ON_BATCH else ""
    if predicts:
        how = (
            f"{batch or 'the model'} or the model in a tf.function (step = tf.function(model); "
            f"step(x, training=False)): {LOOPED[name]} builds a data pipeline and its callbacks "
            "on every call. model(x, training=False) builds none either, but it runs eagerly, "
            "layer by layer and a recurrent layer's timesteps one by one, and can be slower "
            "than predict: Keras's character LSTM generating text took 174-184 ms a character "
            "with predict, 186-364 ms with model(x), 4.5-9 ms with predict_on_batch and 7 ms "
            "in a tf.function, without the profiler"
        )
    else:
        how = (
            f"{batch + ' or ' if batch else ''}the metrics by hand: {LOOPED[name]} builds a "
            "data pipeline and its callbacks on every call"
        )
    f["loop_fix"] = (
        f"Call {LOOPED[name]} once on all the samples (it batches them itself) where they are "
        "known beforehand, or, for one batch a call (each input made from the last output, as "
        f"a generation loop makes them), use {how}"
    )


#: Calls timed one by one for their median to stand for them (``fit.call_ms``).
FIT_MEDIAN_CALLS = 5
#: A fit called this share of its calls on one batch in all is fit per batch.
ONE_BATCH_SHARE = 0.9


def fit_facts(f: dict[str, Any], trace: Any) -> None:
    """``model.fit`` called again and again on one batch each (a DQN fitting each replayed
    transition): how often, and for how long, against the script's wall time."""
    script = trace.script or {}
    fit = script.get("fit") or {}
    wall = float(script.get("wall_s") or 0.0)
    calls, one = int(fit.get("calls") or 0), int(fit.get("one_batch_calls") or 0)
    if not wall or not calls or not fit.get("ns") or one < ONE_BATCH_SHARE * calls:
        return
    f["fit_calls"] = calls
    each = [float(x) for x in fit.get("call_ms") or ()]
    if len(each) >= FIT_MEDIAN_CALLS:
        # The median call, at which rate all of them: the instrumented windows slow the calls
        # they hold (a DQN fitting each of 32 replayed samples read 162 ms a call, the mean of
        # 64, against 76 ms without the profiler, and was ranked above its predict calls,
        # whose per-call cost is the larger).
        f["fit_ms_per_call"] = median(each)
        f["fit_call_how"] = "the median call"
        f["fit_s"] = f["fit_ms_per_call"] * calls / 1e3
    else:
        f["fit_s"] = float(fit["ns"]) / 1e9
        f["fit_ms_per_call"] = 1e3 * f["fit_s"] / calls
        f["fit_call_how"] = "a call"
    f["fit_pct"] = 100 * f["fit_s"] / wall
    f["fit_script_s"] = wall
    # Each call is one step: what a call takes beyond the step's kernels is its set-up (the
    # whole call where the kernels were not measured).
    kernels = f.get("compute_us")
    f["fit_cost_us"] = max(1e3 * f["fit_ms_per_call"] - float(kernels or 0.0), 0.0)
    f["fit_kernels_text"] = (
        f", of which the batch's kernels {kernels:,.0f} µs" if kernels is not None else ""
    )


#: One compiled model reset between trials instead of a new one each: fit keeps its train
#: function (traced once) and the process does not grow (a new Dense model per trial: 2.7 MB
#: a trial, 2.4 MB with keras.backend.clear_session() before each, 0 with one model reset,
#: without the profiler, Keras 3.15).
RESET_MODEL = (
    "build and compile one model, keep its first weights and optimizer state "
    "(model.optimizer.build(model.trainable_variables); w0 = model.get_weights(); "
    "o0 = [v.numpy() for v in model.optimizer.variables]) and begin each trial with "
    "model.set_weights(w0) and v.assign(x) for each optimizer variable v and its saved x "
    "(a learning rate per trial: model.optimizer.learning_rate.assign(lr)): fit keeps its "
    "train function, traced once"
)

#: New models fit one after another, at least this many, each fit at most this many times, whose
#: first steps (each tracing the model's new train function) hold this share of the script.
NEW_MODELS = 3
NEW_MODEL_FITS = 2
NEW_MODELS_PCT = 10
#: ... from the first steps of at least this many later fits found among the long steps.
NEW_MODELS_SEEN = 2


def new_models_facts(f: dict[str, Any], trace: Any) -> None:
    """A new model for each fit (a search over trials, a model leaking memory rebuilt in a
    loop): how many, what each one's first step took beyond a step (its train function built
    and traced: the median over the later fits' first steps in ``script.long_steps``), and
    whether they share one architecture (``fit.call_arch``). A loop building a Dense model per
    trial read "a trace is paid once ... Nothing to change" where those traces were ~70% of
    its time (0.44 s a trial, 0.11 s with one model reset between trials, without the
    profiler)."""
    script = trace.script or {}
    fit = script.get("fit") or {}
    models, calls = int(fit.get("models") or 0), int(fit.get("calls") or 0)
    wall = float(script.get("wall_s") or 0.0)
    if models < NEW_MODELS or calls > NEW_MODEL_FITS * models or not wall:
        return
    rows = {int(r["step"]): r for r in (script.get("long_steps") or {}).get("steps") or ()}
    starts = [int(c) for c in list(fit.get("call_steps") or ())[1:]]
    excess = [
        max(float(rows[c]["us"]) - float(rows[c]["median_us"]), 0.0) / 1e6
        for c in starts
        if c in rows
    ]
    own = _recorded(fit) >= NEW_MODELS and len(_architectures(fit)) > 1
    if len(excess) < NEW_MODELS_SEEN or own:
        # Models of their own architectures (TF's overfitting tutorial: tiny, small, medium
        # and large, compared): each one's trace is the price of having it.
        return
    each = median(excess)
    f["nm_models"] = models
    f["nm_fits"] = "once each" if calls == models else f"{calls} times in all"
    f["nm_each_s"] = each
    f["nm_seen"] = len(excess)
    f["nm_s"] = each * models
    f["nm_pct"] = 100 * f["nm_s"] / wall
    f["nm_script_s"] = wall
    f["nm_cost_us"] = f["nm_s"] * 1e6 / max(int(script.get("steps") or 0), 1)
    reset = (
        f"{RESET_MODEL} (a loop fitting a new Dense model per trial on 1,000 samples took "
        "0.44 s a trial, 0.11 s with one model reset, without the profiler)"
    )
    f["nm_fix"] = (
        f"The {models} models have one architecture: {reset}. "
        "keras.backend.clear_session() between trials does not shorten the trace."
        if one_architecture(fit)
        # Not recorded (an older trace): said as a condition.
        else "Where the trials share one architecture, " + reset + "; where each trial "
        "needs its own, this is the price of each trial (keras.backend.clear_session() "
        "between trials does not shorten it)."
    )


def one_architecture(fit: dict[str, Any]) -> bool:
    """Whether the script's fit calls (``NEW_MODELS`` or more) all trained models of one
    architecture (``fit.call_arch``)."""
    return len(_architectures(fit)) == 1 and _recorded(fit) >= NEW_MODELS


def _architectures(fit: dict[str, Any]) -> set[str]:
    """The distinct architectures the fit calls recorded (``fit.call_arch``)."""
    return {a for a in fit.get("call_arch") or () if a}


def _recorded(fit: dict[str, Any]) -> int:
    """How many fit calls recorded their model's architecture."""
    return sum(1 for a in fit.get("call_arch") or () if a)


def new_models(f: Any) -> bool:
    """Whether the new models' first steps are costly enough to name (``new_models_facts``)."""
    return (f.get("nm_pct") or 0.0) >= NEW_MODELS_PCT


def fit_per_batch(f: Any) -> bool:
    """Whether the script's fit calls are one batch each, often and costly enough to name."""
    return (f.get("fit_calls") or 0) >= MIN_CALLS and (f.get("fit_pct") or 0.0) >= MIN_SHARE_PCT


def looped(f: Any) -> str | None:
    """The Keras method ``predict_in_loop`` names (its call as in the source, ``.predict(``),
    if it fires: a line calling it is that finding's, not another's."""
    if (
        f.get("loop_call")
        and (f.get("loop_calls") or 0) >= MIN_CALLS
        and f.get("loop_samples") is not None
        and f["loop_samples"] <= MAX_SAMPLES
        and (f.get("loop_pct") or 0.0) >= MIN_SHARE_PCT
    ):
        return "." + str(f["loop_call"]).rsplit(".", 1)[-1] + "("
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        id="model_per_fit",
        subject="workload",
        needs=(
            "label",
            "nm_models",
            "nm_fits",
            "nm_each_s",
            "nm_seen",
            "nm_s",
            "nm_pct",
            "nm_script_s",
            "nm_fix",
            "nm_cost_us",
        ),
        when=new_models,
        message="{label}: fit trained {nm_models} new models, {nm_fits}, and each traced its new "
        "train function at its first batch: that batch took {nm_each_s:,.2f} s more than a "
        "batch (the median of {nm_seen} fits' first batches), about {nm_s:,.1f} s in all, "
        "{nm_pct:.0f}% of the script's {nm_script_s:,.1f} s.",
        fix="{nm_fix}",
        cost="nm_cost_us",
        share="nm_pct",
        lead="the {nm_models} new models' first batches, each tracing its train function, took "
        "about {nm_pct:.0f}% of its {nm_script_s:,.1f} s",
    ),
    Rule(
        id="fit_per_batch",
        subject="workload",
        needs=(
            "label",
            "fit_calls",
            "fit_s",
            "fit_ms_per_call",
            "fit_pct",
            "fit_script_s",
            "fit_cost_us",
            "fit_kernels_text",
            "fit_call_how",
        ),
        when=fit_per_batch,
        message="{label}: the script called model.fit {fit_calls:,} times on one batch each: "
        "{fit_s:,.1f} s ({fit_ms_per_call:,.1f} ms {fit_call_how}{fit_kernels_text}), "
        "{fit_pct:.0f}% of the script's {fit_script_s:,.1f} s.",
        fix="Collect the samples and call model.fit once on all of them (or once per batch of "
        "them); for one batch a call, use model.train_on_batch(x, y): the same update without "
        "the data pipeline, epoch iterator and callbacks fit sets up on every call.",
        cost="fit_cost_us",
        share="fit_pct",
        lead="the script's {fit_calls:,} calls of model.fit on one batch each took {fit_pct:.0f}% "
        "of its {fit_script_s:,.1f} s",
    ),
    Rule(
        id="predict_in_loop",
        subject="workload",
        needs=(
            "label",
            "loop_call",
            "loop_calls",
            "loop_s",
            "loop_ms_per_call",
            "loop_pct",
            "script_s",
            "loop_samples",
            "loop_samples_text",
            "train_steps",
            "train_steps_s",
            "loop_fix",
            "loop_cost_per_step_us",
        ),
        when=lambda f: looped(f) is not None,
        message="{label}: the script called {loop_call} {loop_calls:,} times on "
        "{loop_samples_text} each: {loop_s:,.1f} s ({loop_ms_per_call:,.1f} ms a call), "
        "{loop_pct:.0f}% of the script's {script_s:,.1f} s; its {train_steps:,} training steps "
        "took {train_steps_s:,.1f} s.",
        fix="{loop_fix}.",
        cost="loop_cost_per_step_us",
        share="loop_pct",
        lead="the script's {loop_calls:,} calls of {loop_call} on {loop_samples_text} each took "
        "{loop_pct:.0f}% of its {script_s:,.1f} s",
    ),
)

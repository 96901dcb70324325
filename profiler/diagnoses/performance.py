"""Performance diagnoses, from a run's analysis.

Place in the pipeline: analysis (pure), called by ``profiler.analysis.run.analyse`` once every
workload's attribution and the experiments are known. ``facts`` flattens one workload's figures
(and the experiments it is the baseline of) into a dict, in µs for the messages; ``RULES`` is
the table of diagnoses (``profiler.diagnoses.engine.Rule``): each a condition over those facts,
a message and a fix whose numbers all come from the run. A fix quotes the saving the
experiments *measured* where one exists (the fact ``<pair id>_saving_us``, the pairs being the
case study's); otherwise the rule says what to try.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from statistics import median
from typing import Any

from profiler.analysis import attribution, auto_step, purposes, sampling, stats
from profiler.analysis import whatif as whatif_analysis
from profiler.diagnoses import before_steps as start_rules
from profiler.diagnoses import calls as call_rules
from profiler.diagnoses import conversion as convert_rules
from profiler.diagnoses import eager_calls as eager_call_rules
from profiler.diagnoses import gc as gc_rules
from profiler.diagnoses import input as input_rules
from profiler.diagnoses import long_steps as long_rules
from profiler.diagnoses import loops as loop_rules
from profiler.diagnoses import memory as memory_rules
from profiler.diagnoses import py_in_step as py_rules
from profiler.diagnoses import step_lines
from profiler.diagnoses import waiting as waiting_rules
from profiler.diagnoses.engine import Diagnosis, Facts, Rule, evaluate, guarded, ranked
from profiler.model import median_ns, tfdata
from profiler.model.memory import GRAPH, Causes
from profiler.model.records import BesideFetch, HookParts


def facts(wa: Any, experiments: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The flat figures of one workload (a ``WorkloadAnalysis``) the rules read; None if it
    has no attribution."""
    att = wa.attribution
    if att is None:
        return None
    spec, trace = wa.outcome.spec, wa.trace
    work = trace.work
    k = work.units_per_step
    # A category no source measured is None: a rule that needs it stays silent.
    typ = {c: v / 1e3 if att.measured(c) else None for c, v in att.typical.items()}
    parts = {p: v / 1e3 for p, v in att.parts.items()}
    step = att.reference_ns / 1e3
    params = wa.outcome.params
    detection = (trace.script or {}).get("detection") or {}
    hooks = trace.data("hooks")
    loop_facts = getattr(hooks, "loop_info", None)
    # A script's framework is what it turned out to use (its spec says only "script").
    framework = detection.get("framework") or spec.framework
    mode = detection.get("mode") or (loop_facts.mode if loop_facts is not None else "")
    f: dict[str, Any] = {
        "name": spec.name,
        "label": spec.label,
        "framework": framework,
        "mode": mode,
        "script": bool((trace.script or {}).get("path")),
        "uses_function": (
            framework == "keras"
            or mode == "function"
            or getattr(hooks, "target", "") == "tf_function"
        ),
        "same_feeds": detection.get("same_feeds")
        if detection.get("same_feeds") is not None
        else (loop_facts.same_feeds if loop_facts is not None else None),
        "n": params.n if params is not None else None,
        "step_us": step,
        "compute_us": typ["compute"],
        "dispatch_us": typ["dispatch"],
        "feed_fetch_us": typ["feed_fetch"],
        "python_us": typ["python"],
        "tracing_us": typ["tracing"],
        "communication_us": typ.get("communication"),
        "other_us": typ["other"],
        "overhead_pct": 100 * att.overhead_share if att.overhead_share is not None else None,
        "feed_us": parts.get("feed_fetch.feed"),
        "cast_us": parts.get("feed_fetch.cast"),
        "fetch_value_us": parts.get("feed_fetch.fetch_value"),
        "per_call_us": parts.get("dispatch.per_call"),
        "per_op_us": parts.get("dispatch.per_op"),
        # A user's script declares no arithmetic.
        "flops": work.flops_per_step // max(k, 1) if work.flops_per_step else None,
        "eager": mode == "eager"
        or (framework == "tf2" and not mode and "dispatch.per_call" not in parts),
        "units_per_step": k,
    }
    script = trace.script or {}
    f["xla_on"] = attribution.xla_compiled(trace)
    # The compute is XLA's compiled code, whose kernels the tracer did not see.
    f["xla_unseen"] = any("XLA-compiled" in s for s in att.sources.get("compute", ()))
    f["compute_fix"] = _compute_fix(
        script.get("dtype_policy"), script.get("cpu_arith"), framework == "tf1", f["xla_on"]
    )
    fit_call = script.get("fit") or {}
    hooked = fit_call.get("batch_callbacks") or []
    f["batch_callbacks_note"] = (
        f" With steps_per_execution=k, Keras calls {' and '.join(hooked)}'s batch methods once "
        "every k batches, not at each: what it does every N batches then happens every N calls."
        if hooked
        else ""
    )
    # A fit's epoch, as fit counted it (``steps_per_epoch`` is the epoch cost's, where measured).
    f["fit_steps_per_epoch"] = fit_call.get("steps_per_epoch")
    if fit_call.get("steps_per_epoch") == 1 and (fit_call.get("epochs") or 0) > 1:
        f["one_batch_epochs"] = int(fit_call["epochs"])
    if (script.get("fit") or {}).get("run_eagerly"):
        f["eager_switch"] = "model.compile(..., run_eagerly=True)"
        f["eager_fix"] = "compile the model without run_eagerly=True (its default, False)"
    elif script.get("functions_eagerly"):
        f["eager_switch"] = "tf.config.run_functions_eagerly(True)"
        f["eager_fix"] = (
            "remove tf.config.run_functions_eagerly(True) (a debugging switch), or call it with "
            "False before training"
        )
    if f.get("eager_switch"):
        f["eager"] = True
    _switch_facts(f, script, trace)
    if f["feed_us"] is not None:
        f["feed_pct"] = 100 * f["feed_us"] / step if step else None
    if f["fetch_value_us"] is not None:
        f["fetch_value_pct"] = 100 * f["fetch_value_us"] / step if step else None
    if typ["compute"] is not None:
        f["overhead_us"] = step - typ["compute"] - (typ.get("communication") or 0.0)
    if "python.run" in parts and typ["python"] is not None:
        # The Python the hooks did not place in session.run (nor the collector): the script's
        # own, between the calls.
        named = sum(v for k, v in parts.items() if k.startswith("python."))
        f["script_python_us"] = max(typ["python"] - named, 0.0)
    elif step and getattr(hooks, "target", "") == "tf_function":
        # A tf.function step: the hooks time the script's Python outside the call apart
        # (``outside_call``), as a share of their window's step put at the timed step (a
        # custom loop's summaries and print each step, ~1.2 ms of a 2.0 ms step without the
        # profiler: 1,657 µs of the hooks' 2,843 µs; the rest had been called "the tf.function
        # call's per-call cost", which the hooks measured at 415 µs of Python and the native
        # call).
        central = getattr(hooks, "central_mean_ns", None) or {}
        outside, wall = central.get(HookParts.OUTSIDE_CALL), central.get("wall")
        if outside is not None and wall:
            f["script_python_us"] = step * min(outside / wall, 1.0)
    if step and typ["python"] is not None and typ["dispatch"] is not None:
        f["python_dispatch_us"] = typ["python"] + typ["dispatch"]
        f["python_dispatch_pct"] = 100 * f["python_dispatch_us"] / step
    if step and typ["tracing"] is not None:
        f["tracing_pct"] = 100 * typ["tracing"] / step
        # Its 95% interval's low end (None: no interval): a share whose interval reaches zero
        # is not shown to be there, and no generic tracing finding fires on it.
        low = att.share_interval.get("tracing")
        f["tracing_low_pct"] = 100 * low[0] if low is not None else None
    for pair in (experiments or {}).get("pairs", []):
        key = pair.get("id")
        if key and pair["baseline"] == spec.name and pair["status"] == "ok":
            f[f"{key}_saving_us"] = pair["measured_saving_us"]
            f[f"{key}_variant_us"] = pair["variant_us"]
            if pair["variant_us"]:
                f[f"{key}_speedup"] = pair["baseline_us"] / pair["variant_us"]
    families: tuple[Callable[[], None], ...] = (
        lambda: _retrace_facts(f, trace),
        lambda: _growth_facts(f, trace, wa),
        lambda: _epoch_facts(f, trace, wa),
        lambda: _compute_facts(f, trace),
        lambda: input_rules.input_facts(f, parts, trace),
        lambda: input_rules.cache_fill_facts(f, trace, getattr(wa, "one_off", None)),
        lambda: call_rules.call_facts(f, trace),
        lambda: call_rules.fit_facts(f, trace),
        lambda: call_rules.new_models_facts(f, trace),
        lambda: eager_call_rules.eager_call_facts(f, trace),
        lambda: loop_rules.loop_facts(f, trace),
        lambda: loop_rules.where_facts(f, trace),
        lambda: convert_rules.conversion_facts(f, trace),
        lambda: step_lines.step_line_facts(f, trace),
        lambda: _call_overhead_facts(f),
        lambda: py_rules.py_facts(f, trace),
        lambda: _per_op_fix(f),
        lambda: _trend_facts(f, trace, wa),
        lambda: _slow_facts(f, trace),
        lambda: _graph_slow_facts(f),
        lambda: _recreated_facts(f, trace),
        lambda: _constants_facts(f, trace, wa),
        lambda: memory_rules.memory_facts(f, trace),
        lambda: gc_rules.gc_facts(f, trace),
        lambda: long_rules.long_facts(f, trace),
        lambda: waiting_rules.wait_facts(f, trace),
        lambda: start_rules.start_facts(f, trace),
    )
    for family in families:
        guarded(spec.name, family)
    _numerics_facts(f)
    f["step_function"] = _step_function(trace)
    _eager_saving(f, trace)
    sweep = ((experiments or {}).get("sweep") or {}).get(spec.name) or {}
    fit = sweep.get("fit")
    if fit and f["n"]:
        f["a_us"] = fit["a_us"]
        f["b_ns"] = fit["b_ns_per_sample"]
        f["fixed_pct"] = 100 * fit["a_us"] / (fit["a_us"] + fit["b_ns_per_sample"] * f["n"] / 1e3)
        f["n_even"] = (
            fit["a_us"] * 1e3 / fit["b_ns_per_sample"] if fit["b_ns_per_sample"] > 0 else None
        )
    return f


#: A TF1 graph holding this many bytes of constants, whose first steps took ``CONST_FIRST_S``
#: and ``CONST_FIRST_SHARE`` of the script's time beyond steady steps: its data is in the graph.
CONST_BYTES = 50_000_000
CONST_FIRST_S = 1.0
CONST_FIRST_SHARE = 0.1


def _constants_facts(f: dict[str, Any], trace: Any, wa: Any) -> None:
    """A TF1 graph that embeds its data as constants, and the first steps' cost beyond steady
    ones. CS20's logistic regression (its 55,000 MNIST images through
    ``Dataset.from_tensor_slices`` in the graph): 12.7 s of a 33 s run in its first steps,
    none of it named; measured here without the profiler, its iterator's first initialisation
    took 7.7 s, and 0.25 s with the arrays fed through placeholders."""
    script = trace.script or {}
    consts = script.get("graph_constants") or {}
    largest = consts.get("largest")
    one_off = getattr(wa, "one_off", None)
    wall, steps = script.get("wall_s") or 0.0, script.get("steps") or 0
    if not largest or consts.get("bytes", 0) < CONST_BYTES or one_off is None or not steps:
        return
    excess_s = one_off.warmup_excess_ns / 1e9
    if excess_s < CONST_FIRST_S or not wall or excess_s < CONST_FIRST_SHARE * wall:
        return
    f["const_mb"] = consts["bytes"] / 1e6
    shape = ", ".join(str(n) for n in largest["shape"])
    f["const_largest"] = f"`{largest['name']}`, {largest['dtype']} ({shape})"
    f["first_excess_s"] = excess_s
    f["first_excess_pct"] = 100 * excess_s / wall
    f["script_wall_s"] = wall
    # Per step, to rank it with the per-step costs: the script's time it takes, spread.
    f["const_cost_us"] = excess_s * 1e6 / steps


def _few_traces(traces: int, steps: int) -> bool:
    """A few traces after the warm-up in many steps (``FEW_RETRACES``): a one-off each."""
    return traces <= FEW_RETRACES and traces / steps < FEW_RETRACES_PER_STEP


def _retrace_facts(f: dict[str, Any], trace: Any) -> None:
    """The tf.function that retraced most after the warm-up, how often, and why."""
    warm = trace.warmup.n_steps
    functions = (trace.script or {}).get("functions") or []
    # A function the script does not define (Keras's train or predict function): the advice
    # to change its arguments or signature cannot apply; it gets its own finding.
    f["own_functions"] = sum(1 for fn in functions if fn.get("own", True))
    f["function_fix"] = (
        "Run several steps per tf.function call (a loop over tf.range(k) inside it), or larger "
        "batches."
    )
    busiest = max(functions, key=lambda fn: fn.get("calls") or 0, default=None)
    if busiest is not None and not busiest.get("own", True) and busiest.get("calls"):
        # The steps call a tf.function the script does not define (train_on_batch's
        # one_step_on_data in a Python loop): a tf.range loop inside it is not the script's.
        where = busiest.get("module") or "a package"
        f["function_fix"] = (
            f"The tf.function the steps call is {busiest['name'].rsplit('.', 1)[-1]} (in "
            f"{where}), which the script does not define: give the library more batches per "
            "call (model.fit on the whole data with steps_per_execution=k, instead of "
            "train_on_batch in a Python loop), or larger batches."
        )
    steps = max(int((trace.script or {}).get("steps") or 0) - warm, 1)
    best = other = None
    for fn in functions:
        if fn.get("calls") and fn.get("outside_calls") == fn.get("calls"):
            # None of its calls in the steps (generation after fit's batches, TF's text
            # generation tutorial: its 3 traces read "cost about 24 s, 33% of the loop").
            continue
        steady = sum(1 for s in fn.get("trace_steps") or [] if s >= warm)
        own = fn.get("own", True)
        if steady and own and (best is None or steady > best[0]):
            best = (steady, fn)
        if steady and not own and (other is None or steady > other[0]):
            other = (steady, fn)
    if other is not None and _few_traces(other[0], steps):
        # A library function traced once more in hundreds of steps (fit's train function for
        # the last partial batch, 1 in 730): a one-off, not a signature to look into.
        other = None
    predict = ((trace.script or {}).get("keras_calls") or {}).get("predict") or {}
    if functions and best is None and other is None and predict.get("calls", 0) >= steps:
        # model.predict in every step builds a new data pipeline and traces its functions at
        # each call (38% of a predict loop's step): a cost of every step, which the predict
        # finding names with its fix, not a one-off.
        f["one_off_tracing"] = True
        f["tracing_in_predict"] = True
        return
    compiles = call_rules.compiles(trace.script or {})
    if functions and best is None and other is None and compiles >= call_rules.RECOMPILES:
        # Each compile makes a new train function, traced once at its first batch: new
        # functions, none traced again (a loop recompiling every epoch: 18% "tracing" was
        # "no tf.function traced again ... Nothing to change"); per_epoch_cost names them.
        f["one_off_tracing"] = True
        f["one_off_what"] = (
            f"model.compile ran {compiles} times, and each compile makes a new train function, "
            "traced at its first batch: once a model, not at every step"
        )
        return
    if functions and best is None and other is None:
        # Tracing the samples saw, no function retraced after the warm-up: a first trace
        # inside the windows (the first validation's), not a cost of every step.
        f["one_off_tracing"] = True
        f["one_off_what"] = (
            "no tf.function traced again after the warm-up: a function traced for the first "
            "time inside the measured steps (a first validation or predict), once, not at "
            "every step"
        )
        return
    if other is not None:
        where = other[1].get("module") or "a package"
        f["library_where"] = (
            f"{other[1]['name']} (in {where}), which the script does not define: it traced "
            f"{other[0]} times in {steps} steady-state steps"
        )
    if best is None:
        return
    steady, fn = best
    changed = sorted((fn.get("changed") or {}).items(), key=lambda kv: -kv[1]["times"])
    if _few_traces(steady, steps):
        # A few more traces in many steps (a last partial batch of another shape): paid once
        # each, not a cost of every step, and no signature advice is owed.
        why = f": {changed[0][0]} ({changed[0][1]['what']}) differed" if changed else ""
        f["one_off_tracing"] = True
        f["one_off_what"] = (
            f"{fn['name']} traced {steady} more time{'s' if steady > 1 else ''} after the "
            f"warm-up, in {steps:,} steps{why}: a few new inputs (a last partial batch has "
            "another shape), not a trace at every step"
        )
        return
    f["retrace_fn"] = fn["name"]
    f["retraces"] = steady
    f["steady_steps"] = steps
    f["retraces_per_step"] = steady / steps
    if changed:
        name, what = changed[0]
        f["retrace_arg"] = name
        f["retrace_why"] = f"{name} ({what['what']}) differs from the previous call at each retrace"
        if str(what["what"]).startswith("a tensor"):
            # Already a tensor: its shape or dtype changes, which only a signature absorbs.
            f["retrace_fix"] = (
                f"Give {fn['name']} an input_signature with None for the dimension of "
                f"{name} that changes (or reduce_retracing=True), so it traces once."
            )
    else:
        f["retrace_arg"] = "the argument that changes"
        f["retrace_why"] = "no argument differed from the previous call's (a new Python object?)"
    f.setdefault(
        "retrace_fix",
        f"Pass {f['retrace_arg']} as a tensor (tf.constant(...) or a tf.Variable) instead of a "
        f"Python value, or give {fn['name']} an input_signature (or reduce_retracing=True), so "
        "it traces once.",
    )
    _retrace_cost_facts(f, trace, steady, steps)


def _retrace_cost_facts(f: dict[str, Any], trace: Any, retraces: int, steps: int) -> None:
    """What the retraces cost where the sampled steps held none: each about as long as the
    first call (its trace), beyond a timed step. A seq2seq step unrolled over its target
    length (44-47) retraced 3 times in 57 steps, ~50 s a trace: 90% of its 276 s loop, read
    "compute 66%" with no finding."""
    warmup = getattr(getattr(trace, "warmup", None), "durations_ns", None)
    first = warmup()[:1] if warmup is not None else ()
    timed = trace.phase("timed") if first else None
    loop_s = float(((trace.script or {}).get("time") or {}).get("steps_s") or 0.0)
    if not first or timed is None or timed.window is None or not loop_s:
        return
    durations = list(timed.window.durations_ns())
    if not durations:
        return
    each_ns = first[0] - median_ns(durations)
    if each_ns <= 0:
        return
    cost_s = each_ns * retraces / 1e9
    f["retrace_each_s"] = each_ns / 1e9
    f["retrace_cost_s"] = cost_s
    f["retrace_cost_pct"] = min(100 * cost_s / loop_s, 100.0)
    f["retrace_loop_s"] = loop_s
    f["retrace_cost_us"] = cost_s * 1e6 / max(steps, 1)


#: An eager step's Python and dispatch at least this share of it: tf.function is the fix. d2l's
#: eager MLP loop read 44% (compute 44%) and "no fix found" at a 50% floor; tf.function made
#: it 2.6-3.1x faster, measured without the profiler.
EAGER_OVERHEAD_PCT = 30

#: A graph that grows over less than this fraction of the steady steps grows in part of the
#: run only, and the finding names those steps.
GROWS_SPAN = 0.8


def _growth_facts(f: dict[str, Any], trace: Any, wa: Any) -> None:
    """A TF1 graph that grows in the loop: ops per step, and the steps' trend."""
    growth = (trace.script or {}).get("graph_growth") or {}
    if growth.get("ops_per_step", 0) <= 0:
        return
    f["ops_per_step"] = growth["ops_per_step"]
    f["ops_from"], f["ops_to"] = growth["ops_from"], growth["ops_to"]
    f["graph_rate"] = f"{growth['ops_per_step']:g} ops every step"
    start, end = growth.get("grew_from"), growth.get("grew_to")
    steps = growth.get("to_step", 0) - growth.get("from_step", 0)
    if start is not None and end is not None and end > start and end - start < GROWS_SPAN * steps:
        # Only part of the run grows it (CS20's convnet: its test loop, after 100 training
        # steps that make no op): "every step" and the rate over the whole run were wrong.
        added = growth["ops_to"] - growth["ops_from"]
        f["graph_rate"] = (
            f"{added:,} ops in steps {start:,}–{end:,} only, {added / (end - start):.3g} a step "
            "there,"
        )
    f["graph_ops_where"] = "(tf.assign, tf.add ... called inside it)"
    f["graph_fix"] = GRAPH_FIX
    # The new ops' types and the script's lines that made them, where the memory probes saw
    # them (a CS20 convnet's test loop makes Softmax, Equal and ArgMax ops at lines 207-208:
    # the finding said "tf.assign, tf.add ...").
    causes = Causes.from_json(((trace.script or {}).get("memory") or {}).get("causes"))
    sites = [o for c in (causes.grew if causes else ()) if c.kind == GRAPH for o in c.ops]
    if sites:
        types = ", ".join(dict.fromkeys(o.type for o in sites[:6]))
        lines = [o for o in sites if o.line is not None]
        where = f"; line {lines[0].line}: `{lines[0].text.strip()}`" if lines else ""
        f["graph_ops_where"] = f"({types}{where})"
        if lines and SAVER_LINE.search(lines[0].text):
            f["graph_fix"] = SAVER_FIX


#: A line making a TF1 Saver (``tf.compat.v1.train.Saver()``): each adds its save and
#: restore ops to the graph.
SAVER_LINE = re.compile(r"\bSaver\(")
#: Its fix (a loop making a Saver at every save, every 20 steps: 78% of the loop without the
#: profiler; "feed the changing value through a placeholder" was no advice for it).
SAVER_FIX = (
    "Create the Saver once, before the loop, and call its save() in the loop: each "
    "tf.compat.v1.train.Saver() adds its save and restore ops to the graph; call "
    "graph.finalize() before the loop so any op created later raises at once."
)
GRAPH_FIX = (
    "Build every op once, before the loop (feed the changing value through a placeholder), "
    "and call graph.finalize() before the loop so any op created later raises at once."
)


#: Samples inside the steps for the called function's share to bound the eager fix's saving.
FUNCTION_SHARE_SAMPLES = 30
#: ... and the least share of them it must hold for that bound.
FUNCTION_SHARE_MIN = 0.1


def _eager_saving(f: dict[str, Any], trace: Any) -> None:
    """What wrapping the step's function in tf.function can save at most: the step's Python
    and dispatch, but no more than the share of the step the function itself holds (sampled)
    where the loop calls one function and does more beside it. TF's basic training loops
    guide: its eager train() 80% of each epoch beside .numpy() reads and prints, without the
    profiler; the whole step's Python and dispatch, 96% of it, was offered as the saving."""
    if f.get("python_dispatch_us") is None:
        return
    f["eager_saving_us"] = f["python_dispatch_us"]
    f["eager_saving_how"] = ""
    if not f.get("eager"):  # only the eager finding reads it
        return
    auto = (trace.script or {}).get("auto_step") or {}
    rec = trace.phase("sampled")
    if auto.get("updates") or not auto.get("calls") or rec is None or not rec.samples:
        return
    name = str(auto["calls"][0])
    got = sampling.function_share(rec.samples, name)
    if got is None or got[1] < FUNCTION_SHARE_SAMPLES or not f.get("step_us"):
        return
    share, n = got
    # Under a tenth: the function's frames not found by that name (a method called through
    # another), not a bound.
    if share >= FUNCTION_SHARE_MIN and share * f["step_us"] < f["python_dispatch_us"]:
        f["eager_saving_us"] = share * f["step_us"]
        f["eager_saving_how"] = (
            f" ({name} holds {100 * share:.0f}% of the step, from {n:,} samples; the rest of "
            "the loop's body stays as it is)"
        )


def _step_function(trace: Any) -> str:
    """The step's function in words: the one the automatic step's loop calls, or the
    ``--step-function`` given, or the generic phrase."""
    script = trace.script or {}
    auto = script.get("auto_step") or {}
    if auto.get("chosen_line") and auto.get("calls"):
        if auto.get("updates"):
            # The loop's own body updates the model (``optimizer.apply_gradients`` after
            # ``grad(...)``, the TF walkthrough's loop): the whole body is the step, but not
            # what makes the batch or prints (handson-ml's loop: "its call of random_batch"
            # moved inside froze its numpy batch at tracing; d2l's metric.add calls float()).
            # Which go inside said as plainly as which stay out: "of the functions it calls,
            # grad, those that ... stay outside" read as keeping grad (the tape's) outside.
            calls = ", ".join(auto["calls"][:4])
            fresh = [str(n) for n in auto.get("fresh_metrics") or ()]
            metrics = (
                f"; the metrics it updates ({', '.join(fresh[:4])}) made once, before the loop "
                f"at line {auto.get('fresh_metrics_line')}, and cleared with reset_state() "
                "where it makes them now: made anew at each of its iterations, a tf.function "
                "using them traces again each time (TF's custom training walkthrough, the "
                "metrics passed in: 1.8x slower than eager, without the profiler)"
                if fresh
                else ""
            )
            line, model = [*(auto.get("second_forward") or ()), 0, ""][:2]
            if line:
                # TF's walkthrough runs the model again for its accuracy metric: 17% of the
                # eager step, ~0.1 ms inside tf.function, without the profiler.
                metrics += (
                    f"; line {line} runs {model} on the batch a second time, beside the forward "
                    "pass of the function it is passed to: return the step's predictions and "
                    "use them there"
                )
            return (
                f"the body of the loop at {auto_step.chosen_where(auto)} (its forward pass, "
                "gradients, update and metrics, moved into one function that takes the batch "
                f"as its arguments; of the script's functions it calls ({calls}), those doing "
                "the step's math go inside it, and those that make the batch in numpy, print, "
                "or convert with float() or .numpy() stay outside, as inside tf.function they "
                f"run once, when it traces{metrics})"
            )
        return f"{auto['calls'][0]} (called by the loop at {auto_step.chosen_where(auto)})"
    marked = (script.get("marks") or {}).get("step_function")
    if marked:
        return marked
    if auto.get("chosen_line"):
        return f"the body of the loop at {auto_step.chosen_where(auto)} (moved into a function)"
    return "the step function"


def _trend_facts(f: dict[str, Any], trace: Any, wa: Any) -> None:
    """Whether steps grow with the step number: across a script's whole run where its blocks
    of steps were recorded (an epoch's or a tenth's median each; cyclic costs and a window's
    noise cancel out), else across the timed window. The points must rise steadily (most
    pairs of them), not just have a slope: a loaded machine's drift has one too."""
    step = f["step_us"]
    rows = (trace.script or {}).get("blocks") or []
    timed = trace.phase("timed")
    # Blocks that overlap an instrumented window run slower for it (line_profiler ~1.6x):
    # only the timed window's and the free-running rest's count (the first holds the warm-up).
    free = [r for r in rows[1:] if not r.get("instrumented")]
    if len(free) >= TREND_BLOCKS and step:
        xs = [(r["from_step"] + r["to_step"]) / 2 for r in free]
        ys = [r.get("mean_us", r["median_us"]) * 1e3 for r in free]
        # A growth rises in the blocks' medians as in their trimmed means: one block of
        # faster steps among level ones (a DQN's, beside a busy process: medians 304, 178,
        # 304 ... 307 ms, means 276, 200, 288 ... 319) gave the means a rise of their own.
        medians = [r["median_us"] * 1e3 for r in free]
        # More work a step costs more CPU time a step; a machine lending the process fewer of
        # its cores slows the wall time alone (an eager loop beside a busy process: its blocks
        # 26 ms -> 45 ms, read as a growth of +1.7 ms every 100 steps; 0.1 ms without it).
        cpus = [r.get("cpu_us") for r in free]
        if all(c is not None for c in cpus):
            f["trend_cpu_rising"] = stats.rising_share(xs, [float(c or 0.0) for c in cpus])
        span = free[-1]["to_step"] - free[0]["from_step"] + 1
        f["trend_where"] = (
            f"across the run's steps {free[0]['from_step']:,}–{free[-1]['to_step']:,} "
            "(outside the instrumented windows)"
        )
        _shift_facts(f, trace, free, xs, medians, cpus)
    elif timed is not None and timed.window is not None and step:
        durations = stats.per_step(timed.window.durations_ns(), trace.work)
        if len(durations) < TREND_STEPS:
            return
        xs, ys = stats.trend_points(durations)
        medians = ys
        span = len(durations)
        f["trend_where"] = "in the timed window"
        # A growth inside the timed window that the run's last block of steps does not show
        # (instrumented or not, which slows it, never speeds it) was the machine's: a healthy
        # fit beside other work read "+49 ms every 100 steps" in its window of 18 ms steps,
        # its epochs' medians 19, 20, 18, 16, 11 ms.
        window = timed.window.segments
        end = window[-1].first_step + window[-1].n_steps if window else 0
        if rows and int(rows[-1]["from_step"]) >= end + span:
            f["trend_refuted"] = float(rows[-1]["median_us"]) <= step
    else:
        return
    if len(xs) < 2:
        return
    per_step = stats.theil_sen(xs, ys)
    interval = stats.theil_sen_interval(xs, ys)
    allow = stats.drift_allowance(getattr(wa, "drift", None), step * 1e3, span)
    if interval is not None and allow:
        # What the machine's measured drift explains is no growth (issue 23).
        interval = (interval[0] - allow, interval[1] + allow)
    # A trend is reported only when its interval excludes zero (noise has a slope too).
    f["trend_low_us_per_100"] = interval[0] * 100 / 1e3 if interval else 0.0
    f["trend_high_us_per_100"] = interval[1] * 100 / 1e3 if interval else 0.0
    f["trend_rising"] = min(stats.rising_share(xs, ys), stats.rising_share(xs, medians))
    f["trend_us_per_100"] = per_step * 100 / 1e3
    f["trend_pct_per_100"] = 100 * f["trend_us_per_100"] / step
    # How much the trend adds across the steps it was measured on: noise gives a slope too.
    f["trend_window_pct"] = f["trend_pct_per_100"] * span / 100


#: Cores more (or fewer) that other processes kept busy across a level change of the steps
#: for it to be the machine's.
SHIFT_OTHERS = 0.3


def _load_shifted(free: list[dict[str, Any]], at: int, slower: bool) -> bool:
    """Whether the other processes' load changed with the steps' level, the same way (busier
    where the steps got slower): the machine's change, not the loop's. A numpy loop beside
    another session's work read "from about iteration 1,816 ... steps take 3.9x ... the loop
    does more work a step" where its work per iteration did not change (32.2 ms early and 32.4
    ms late, alternated, without the profiler); its process's CPU time rose with the wall time,
    as two BLAS threads waiting for a core spin."""
    others = [float(o) for r in free if (o := r.get("others_cores")) is not None]
    if at <= 0 or at >= len(free) or len(others) < len(free):
        return False
    before, after = median(others[:at]), median(others[at:])
    return (after - before if slower else before - after) >= SHIFT_OTHERS


def _shift_facts(
    f: dict[str, Any],
    trace: Any,
    free: list[dict[str, Any]],
    xs: list[float],
    medians: list[float],
    cpus: list[Any],
) -> None:
    """Where the blocks' rise is one jump between two flat levels (``stats.level_shift``), and
    the CPU time a step jumped with it where it was read (a busy process starting mid-run
    slows the wall time alone): the step at which the later level began."""
    shift = stats.level_shift(xs, medians)
    if shift is None:
        return
    if _load_shifted(free, shift.at, shift.after > shift.before):
        f["shift_load"] = True
        return
    if all(c is not None for c in cpus):
        low = median_ns([int(c * 1e3) for c in cpus[: shift.at]])
        high = median_ns([int(c * 1e3) for c in cpus[shift.at :]])
        if low <= 0 or high < stats.SHIFT_RATIO * low:
            return
    # Blocks count the measured steps; the loop's iterations include those watched before them.
    watched = int(((trace.script or {}).get("auto_step") or {}).get("watched_iterations") or 0)
    at = int(free[shift.at]["from_step"])
    after = int(free[shift.at - 1]["to_step"]) + 1
    f["shift_step"] = at + watched
    # Instrumented blocks between the two levels are left out: the jump lies among them.
    f["shift_where"] = (
        f"from about iteration {at + watched:,} of the loop"
        if at == after
        else f"from between iterations {after + watched:,} and {at + watched:,} of the loop"
    )
    f["shift_before_us"] = shift.before / 1e3
    f["shift_after_us"] = shift.after / 1e3
    f["shift_ratio"] = shift.after / shift.before
    f["shift_timed_words"] = ""
    timed = trace.phase("timed")
    segments = timed.window.segments if timed is not None and timed.window is not None else ()
    if segments:
        first = segments[0].first_step
        last = segments[-1].first_step + segments[-1].n_steps - 1
        where = "before" if last < at else "after" if first >= at else "on both sides of"
        f["shift_timed_words"] = (
            f"; the timed window's steps (iterations {first + watched:,}–{last + watched:,}), "
            f"which the split above describes, ran {where} it"
        )
        _shift_fit(f, trace.script or {}, free, shift.at)
        if where != "before":
            # The timed window ran in that fit's steps (--warmup past the earlier fits):
            # nothing left to measure apart.
            f.pop("shift_warmup", None)


def _shift_fit(
    f: dict[str, Any], script: Mapping[str, Any], free: list[dict[str, Any]], at: int
) -> None:
    """Where the later level began with a fit of another model (the overfitting tutorial fits
    four models in a row, 1.9-3.2 s each and the last 12 s without the profiler; from the
    last's first step, "the loop does more work a step ... a replay memory"): which fit, and
    the calls' times."""
    fit = script.get("fit") or {}
    if int(fit.get("models") or 1) < 2:
        return
    starts = [int(x) for x in fit.get("call_steps") or ()]
    took = [float(x) for x in fit.get("call_ms") or ()]
    low, high = int(free[at - 1]["from_step"]), int(free[at]["to_step"])
    hit = next((i for i, s0 in enumerate(starts) if i and low <= s0 <= high), None)
    if hit is None or len(took) != len(starts) or not sum(took):
        return
    names = [str(n) for n in fit.get("call_models") or ()]
    name = f" (model {names[hit]!r})" if hit < len(names) and names[hit] else ""
    f["shift_fit"] = (
        f"its fit call {hit + 1} of {len(starts)}{name}, from step {starts[hit]:,}: the calls "
        f"took {', '.join(f'{ms / 1e3:.1f} s' for ms in took)}, "
        f"{100 * sum(took[hit:]) / sum(took):.0f}% of them from that call on"
    )
    f["shift_warmup"] = starts[hit] + 10
    wall = float(script.get("wall_s") or 0.0)
    if wall > 0:
        # Its share of the script, for the verdict where it holds most of it (the imbalanced-
        # data tutorial's oversampled fit, 72% of the script without the profiler, 45x the
        # earlier fits' steps: the verdict led with their validations).
        f["shift_fit_pct"] = min(100 * sum(took[hit:]) / 1e3 / wall, 100.0)
        f["shift_fit_lead"] = (
            f"a later fit{name}, fit call {hit + 1} of {len(starts)} from step {starts[hit]:,}, "
            f"took {f['shift_fit_pct']:.0f}% of the script's {wall:,.1f} s, its steps "
            f"{f['shift_ratio']:.1f}× those the phases measured"
        )


#: What the findings of a later model's fit say (``_shift_fit``), measured apart or not.
LATER_FIT_NEEDS = (
    "label",
    "shift_fit",
    "shift_step",
    "shift_before_us",
    "shift_after_us",
    "shift_ratio",
    "shift_timed_words",
)
LATER_FIT_MESSAGE = (
    "{label}: from step {shift_step:,} the script fits another model ({shift_fit}); its steps "
    "take {shift_after_us:,.0f} µs, {shift_ratio:.1f}× the {shift_before_us:,.0f} µs of the "
    "fits before{shift_timed_words}."
)


def _validations(
    fit: dict[str, Any], step_ns: float, low_half: bool = False
) -> stats.EpochCost | None:
    """The epochs' cost from fit's validations, each timed (``validations_ns``), the first
    left out (it traces the test function: 4.4 s against 2.6 s later); None under one after
    the first. A 3-epoch fit leaves one boundary in the windows, and that one can be the first
    (a siamese example's read 53% of the training time, 28% measured without the profiler).
    Validations that ran while a phase instrumented or altered the loop
    (``validations_altered``) are left out: a conv net's 0.13 s validation read 0.2-2.9 s
    during the what-ifs and the line profiler, and 1.8 s was called 45% of its training."""
    altered = set() if low_half else {int(i) for i in fit.get("validations_altered") or []}
    # Each new model's first validation traces its test function, not only the run's first.
    firsts = {0, *(int(i) for i in fit.get("first_validations") or [])}
    timed = sorted(
        int(v)
        for i, v in enumerate(fit.get("validations_ns") or [])
        if i not in firsts and i not in altered
    )
    if low_half:
        # ``low_half``: every one after the first, altered ones too, and the lower half of them.
        timed = timed[: max(len(timed) // 2, 1)]
    per_epoch = int(fit.get("steps_per_epoch") or 0)
    if not timed or not per_epoch or step_ns <= 0:
        return None
    batches = per_epoch * step_ns

    def share(ns: float) -> float:
        return ns / (ns + batches)

    mid = median_ns(timed)
    return stats.EpochCost(
        steps_per_epoch=per_epoch,
        boundaries=len(timed),
        excess_ns=mid,
        batch_ns=int(step_ns),
        share=share(mid),
        low_share=share(min(timed)),
    )


def _long_boundaries(script: dict[str, Any], step_ns: float) -> stats.EpochCost | None:
    """The epochs' cost from the run's long steps at a fit's epoch boundaries that no phase
    instrumented (``script.long_steps``: every step of the run, the windows' and the rest):
    where the windows held under two boundaries. Ten ``fit(epochs=1)`` calls each followed by
    ``model.evaluate`` on 2,000 images: one boundary in the windows, five long steps of 1.7-5.5 s
    after them at the calls' 63-batch period, and no finding (the evaluations ~28% of the loop
    without the profiler). The first boundary is left out (it traces the test function)."""
    fit = script.get("fit") or {}
    per = int(fit.get("steps_per_epoch") or 0)
    first = int(fit.get("first_step") or 0)
    # Inside the fit: its end is no boundary (the text generation tutorial's 2-epoch fit was
    # followed by 300 one-character tf.function calls of 0.9 ms, steps too; its last batch,
    # 373 ms against them, read "every epoch's first batch takes 203 s more").
    total = int(fit.get("total_steps") or 0)
    end = first + total if total and int(fit.get("calls") or 0) == 1 else None
    candidates = [
        r
        for r in (script.get("long_steps") or {}).get("steps") or ()
        if not r.get("phase")
        and int(r["step"]) > first + per
        and (end is None or int(r["step"]) < end)
    ]
    if per < 2 or step_ns <= 0 or not candidates:
        return None
    # At the epochs' period, where the most of them fall: a what-if's blocks can shift the
    # steps' count by one (a CSV tutorial's fit: its boundaries after the what-ifs at 5601,
    # 6401, ... against 800-batch epochs, 1.3 s each, and no finding).
    at = Counter((int(r["step"]) - first) % per for r in candidates)
    residue, count = max(at.items(), key=lambda kv: (kv[1], kv[0] == 0))
    if residue != 0 and count < 2:
        residue = 0
    rows = [r for r in candidates if (int(r["step"]) - first) % per == residue]
    if not rows:
        return None
    if len(rows) == 1:
        # One is a recurring cost (the first boundary is left out) where it is far beyond any
        # preemption (``long_steps.FEW_*``): a 4-epoch fit of 188-batch epochs had one boundary
        # outside the windows and the what-ifs' steps, 640 ms against 22 ms batches (a shuffle
        # buffer refilled through a map, ~1 s an epoch without the profiler).
        (r,) = rows
        us, med = float(r["us"]), float(r["median_us"])
        if us < long_rules.FEW_FACTOR * med or (us - med) * 1e3 < long_rules.FEW_MIN_NS:
            return None
    # Each as a multiple of the steps around it, at the timed window's step (the tenths of a
    # busy run go at different speeds), never more than it took beyond them: a stall is not
    # the steps' speed times anything (a one-device MirroredStrategy fit's 10.3 s boundary
    # against 7 ms batches read 13.5 s at the 9.2 ms timed step).
    excess = sorted(
        min(
            max(float(r["us"]) / float(r["median_us"]) - 1.0, 0.0) * step_ns,
            max(float(r["us"]) - float(r["median_us"]), 0.0) * 1e3,
        )
        for r in rows
    )
    batches = per * step_ns
    # The lower half's median: a busy machine and a phase's after-effects (an evaluate retraced
    # after the what-ifs altered the model: 2.7 s against ~0.5 s) only lengthen a boundary.
    mid = median(excess[: max(len(excess) // 2, 1)])
    return stats.EpochCost(
        steps_per_epoch=per,
        boundaries=len(rows),
        excess_ns=int(mid),
        batch_ns=int(step_ns),
        share=mid / (mid + batches),
        low_share=excess[0] / (excess[0] + batches),
        clean=len(rows),
    )


def _epoch_facts(f: dict[str, Any], trace: Any, wa: Any) -> None:
    """What each epoch boundary of a fit costs, and what happens at one."""
    e = wa.epochs
    script = trace.script or {}
    fit = script.get("fit") or {}
    models = int(fit.get("models") or 1)
    if models > 1 and int(fit.get("calls") or 1) <= models and (fit.get("epochs") or 1) == 1:
        # Several models, each fit once for one epoch: their boundaries are one training's
        # end and another's start, no loop's (Keras's distillation example, a teacher, a
        # distiller and a student fit once each, read "a model.compile before each of the 3
        # fit calls ... compile once, before the loop ... fit(epochs=3)").
        return
    ends = epoch_end_ms(fit)
    timed = None
    att = getattr(wa, "attribution", None)
    step = float(att.reference_ns if att is not None else getattr(e, "batch_ns", 0) or 0)
    # The validations timed as written (None: none, or no validation).
    own = _validations(fit, step)
    outside = None
    if e is None or e.boundaries < 2:
        timed = own
        outside = _long_boundaries(script, step) if own is None else None
        e = timed or outside or e
    elif not e.clean:
        # Every boundary in an instrumented window: the validations' lower half too (all of
        # them after the first, those a phase instrumented included), as load and the
        # instruments only lengthen them, where that is less (a hand-written RNN's 50 ms
        # validation read 250-680 ms in the windows beside a busy process, 49-54 ms in the
        # what-ifs' blocks, 603 ms the one as written after them, and the boundaries "54% of
        # the training time").
        low = _validations(fit, step, low_half=True)
        if low is not None and (own is None or low.excess_ns < own.excess_ns):
            own = low
            f["epoch_low_half"] = True
    if (
        e is not None
        and e.boundaries >= 2
        and not e.clean
        and own is not None
        and (own.excess_ns < e.excess_ns)
    ):
        # Every boundary in an instrumented window, which slows a validation more than the
        # batches (a 24,000-row validation read 6.0 s a boundary there, 2.1 s as written and
        # 2.3 s without the profiler): the validations timed as written, where less.
        f["epoch_instrumented_us"] = e.excess_ns / 1e3
        # The callbacks' epoch ends, timed as written, are the boundary's too (a fit with
        # TensorBoard's histograms and a checkpoint each epoch: validation 114 ms, the callbacks
        # 107 ms; the validation alone read "23% of the training time" where its boundaries
        # took 46-64% without the profiler).
        ends_ns = min(sum(ends.values()) * 1e6, max(e.excess_ns - own.excess_ns, 0))
        batches = own.steps_per_epoch * own.batch_ns
        least = own.low_share * batches / (1 - own.low_share) if own.low_share < 1 else 0.0
        with_ends = own.excess_ns + ends_ns
        f["epoch_ends_us"] = ends_ns / 1e3
        f["epoch_validation_us"] = own.excess_ns / 1e3
        e = dataclasses.replace(
            e,
            excess_ns=int(with_ends),
            share=with_ends / (with_ends + batches) if batches else own.share,
            low_share=min((least + ends_ns) / (least + ends_ns + batches), e.low_share)
            if batches
            else min(own.low_share, e.low_share),
        )
    if e is None:
        return
    ends_us = f.get("epoch_ends_us") or 0.0
    validation_us = f.get("epoch_validation_us", e.excess_ns / 1e3)
    f["epoch_what"] = (
        f"every epoch's validation takes {e.excess_ns / 1e3:,.0f} µs ({e.boundaries} timed "
        "after the first, which traces its function)"
        if timed is not None
        else (
            f"every epoch's validation and epoch-end callbacks take {e.excess_ns / 1e3:,.0f} µs "
            f"(the callbacks' epoch ends {ends_us:,.0f} µs, timed as written; the validation "
            f"{validation_us:,.0f} µs, "
            if ends_us >= 1
            else f"every epoch's validation takes {e.excess_ns / 1e3:,.0f} µs ("
        )
        + (
            "the lower half's median of those after the first, most timed while a phase "
            "instrumented the loop: load and the instruments only lengthen them"
            if f.pop("epoch_low_half", False)
            else "timed as written"
        )
        + f"; the {e.boundaries} epoch boundaries the instrumented windows held read "
        f"{f['epoch_instrumented_us']:,.0f} µs)"
        if "epoch_instrumented_us" in f
        else f"every {{epoch_unit}}'s first batch takes {e.excess_ns / 1e3:,.0f} µs more than a "
        f"batch (the lower half's median of {e.boundaries} {{epoch_unit}} boundaries outside "
        "the instrumented windows, the first left out: load and the phases' after-effects only "
        "lengthen them)"
        if outside is not None and e.boundaries > 1
        else f"every {{epoch_unit}}'s first batch takes {e.excess_ns / 1e3:,.0f} µs more than a "
        "batch (one {epoch_unit} boundary outside the instrumented windows, the first left "
        "out: the others fell in the what-ifs' and the phases' switches)"
        if outside is not None
        else f"every {{epoch_unit}}'s first batch takes {e.excess_ns / 1e3:,.0f} µs more than a "
        f"batch ({e.boundaries} {{epoch_unit}} boundaries measured)"
    )
    f["epoch_excess_us"] = e.excess_ns / 1e3
    f["epoch_share_pct"] = 100 * e.share
    f["epoch_low_pct"] = 100 * e.low_share
    f["steps_per_epoch"] = e.steps_per_epoch
    f["epoch_boundaries"] = e.boundaries
    f["epoch_one_outside"] = outside is not None and e is outside and e.boundaries == 1
    # One validation timed as written after the first (which traces): a recurring cost, not
    # the one-off the rule's two boundaries guard against (Keras's transformer text
    # classifier, 2 epochs: its second validation 1.53 s against 5.2 s of batches, ~36% of the
    # training time without the profiler, went unnamed).
    f["epoch_one_timed"] = timed is not None and e is timed and e.boundaries == 1
    # The excess spread over the epoch's batches: what it adds to an average step.
    f["epoch_cost_per_step_us"] = e.excess_ns / e.steps_per_epoch / 1e3
    work = []
    if fit.get("validation"):
        freq = fit.get("validation_freq") or 1
        work.append("validation" + (" every epoch" if freq == 1 else f" every {freq} epochs"))
    callbacks = [c for c in fit.get("callbacks") or [] if c not in ("History", "ProgbarLogger")]
    if callbacks:
        work.append(
            "the callbacks "
            + ", ".join(
                f"{c} ({ends[c]:,.1f} ms an epoch, timed)" if c in ends else c for c in callbacks
            )
        )
    calls = int(fit.get("calls") or 1)
    per_call = calls > 1 and (fit.get("epochs") or 1) == 1
    f["epoch_unit"] = "fit call" if per_call else "epoch"
    f["epoch_what"] = f["epoch_what"].replace("{epoch_unit}", f["epoch_unit"])
    # A Keras evaluate or predict the script calls once a boundary (after each fit call, at
    # each epoch's end): part of the boundary, timed (60 fit(epochs=1) calls each followed by
    # model.evaluate on 512 rows: 144 ms of each 153 ms boundary; 44% of the loop without the
    # profiler, the fit calls' own set-up 28%).
    boundaries = calls if per_call else int(fit.get("epochs") or 0)
    # Only between fit calls: a Keras call made at a single fit's epoch boundaries is inside
    # fit (a callback's) and not counted; those counted were made before or after it (a
    # transfer-learning tutorial's evaluate before and after training read "model.evaluate,
    # called 2 times at each of the 12-batch epochs", "validate inside fit instead").
    between = _boundary_calls(trace, boundaries, e.excess_ns) if per_call else None
    if between:
        work.append(between[0])
    arrays = fit.get("x_kind") == "arrays"
    if arrays and not per_call:
        # Keras 3 builds an input pipeline from arrays anew each epoch: 8-batch epochs of a
        # tabular fit took 75-150 ms from arrays, 18-29 ms from a tf.data set built once
        # (shuffled too), measured without the profiler.
        work.append(
            "the new iterator fit starts each epoch over the numpy arrays (a shuffle of their "
            "indices and a gather per batch)"
        )
    compiles = call_rules.compiles(script)
    recompiled = per_call and compiles >= max(calls - 1, call_rules.RECOMPILES)
    if recompiled:
        work.append(
            f"a model.compile before each of the {calls} fit calls ({compiles} in all: each "
            "makes a new optimizer and a new train function, traced at the call's first batch) "
            "and each call's set-up"
        )
    elif per_call:
        work.append(
            f"each of the {calls} fit calls' set-up (its data adapter, iterator and callbacks)"
        )
    refill = _shuffle_refill(script)
    if refill:
        work.append(refill[0])
    f["epoch_work"] = " and ".join(work) or "the epoch's data iterator set-up"
    split = timed is None and outside is None and "epoch_instrumented_us" not in f
    costly = {c: ms for c, ms in ends.items() if ms * 1e3 >= CALLBACK_NAMED * e.excess_ns / 1e3}
    if split and own is not None and own.excess_ns < e.excess_ns:
        # The boundary holds the validation and the next epoch's set-up: the validations'
        # own time, where timed as written, says how much is which; the callbacks' epoch
        # ends too, timed as written (a checkpoint each epoch was "the next epoch's set-up").
        named = "".join(f"; {c}'s epoch end, timed: {ms * 1e3:,.0f} µs" for c, ms in costly.items())
        f["epoch_what"] += (
            f" (its validation, timed: {own.excess_ns / 1e3:,.0f} µs of it{named}; the rest, "
            "not timed apart: fit's own epoch end and the next epoch's set-up)"
        )
    untimed = _untimed_rest(fit, work, callbacks, ends, e.excess_ns)
    if untimed:
        f["epoch_work"] += untimed[0]
    fixes = []
    if untimed and untimed[1]:
        fixes.append(untimed[1])
    if recompiled:
        # A loop recompiling to change the learning rate: ~75% of its time without the
        # profiler (0.68-0.83 s an epoch, 0.15-0.20 s fit(epochs=1) alone without recompiling).
        fixes.append(
            "compile once, before the loop: to change the learning rate use a keras.optimizers."
            "schedules.LearningRateSchedule, the LearningRateScheduler callback or "
            "model.optimizer.learning_rate.assign(...), not a new compile"
        )
    if between:
        fixes.append(between[1])
    if refill:
        fixes.append(refill[1])
    histograms = int(fit.get("histogram_freq") or 0)
    histogram_fix = (
        f"TensorBoard(histogram_freq={histograms}) writes a histogram of every weight "
        f"{'at each epoch' if histograms == 1 else f'every {histograms} epochs'}: "
        "histogram_freq=0, or a larger one"
    )
    # The validation's fix first where its timed part is the larger (a callbacks-heavy fit:
    # validation 310 ms of a 600 ms boundary, TensorBoard's epoch end 26 ms, was told
    # histogram_freq=0 first; without the profiler histogram_freq=0 saved nothing measurable).
    val_ns = own.excess_ns if own is not None else None
    tb_ns = ends["TensorBoard"] * 1e6 if "TensorBoard" in ends else None
    histograms_first = not (
        fit.get("validation") and val_ns is not None and (tb_ns is None or tb_ns < val_ns)
    )
    if histograms and histograms_first:
        # The TensorBoard tutorial's histogram_freq=1: 56% of a small fit's loop without the
        # profiler, told "TensorBoard: update_freq, profile_batch=0" (profile_batch=0 set).
        fixes.append(histogram_fix)
    dataset_fix = ""
    if arrays and not per_call:
        given = (
            "and the validation set as one too (split off from the arrays once, not "
            "validation_split)"
            if fit.get("validation_kind") == "arrays"
            else ""
        )
        size = _int_or(fit.get("batch_size"), 32)
        rest = e.excess_ns - val_ns if val_ns is not None else None
        dataset_fix = (
            "give fit a tf.data.Dataset built once, before fit (tf.data.Dataset."
            f"from_tensor_slices((x, y)).shuffle(len(x)).batch({size})"
            ".prefetch(tf.data.AUTOTUNE))"
            + (f", {given}" if given else "")
            + ": from numpy arrays fit starts each epoch with a new permutation and a new "
            "iterator (a tabular fit's 8-batch epochs took 75-150 ms from arrays, 18-29 ms from "
            "a dataset built once, without the profiler; not measured on this loop"
            + (
                f": it removes at most the boundary's part beside the validation, "
                f"{rest / 1e3:,.0f} µs an epoch)"
                if rest is not None and rest > 0
                else ", where it may not help: a 20-batch fit's epochs took 0.70 s from "
                "arrays, 0.73 s from a dataset)"
            )
        )
    # The dataset's fix first where the validation, timed, is under half of the boundary
    # (the regression tutorial's 8-batch epochs from arrays: validation 28 ms of 115 ms; a
    # dataset built once saved 61% of the fit, validation_freq=10 27%, without the profiler).
    dataset_first = bool(dataset_fix) and val_ns is not None and 2 * val_ns < e.excess_ns
    if dataset_first:
        fixes.append(dataset_fix)
    if fit.get("validation"):
        # First: a validation set's evaluation is most of a boundary wherever it is large
        # (24,000 rows: 1.8 s of a boundary, the arrays' pipeline ~0.1 s of it).
        watchers = [c for c in callbacks if c in VAL_WATCHERS]
        # Fewer batches only where it validates on more than one (the segmentation
        # tutorial's validation_steps=1 was told "on fewer batches (validation_steps)").
        given_steps = int(fit.get("validation_steps") or 0)
        fewer = given_steps != 1
        if watchers:
            # They read the validation loss each epoch: every k epochs changes what their
            # patience counts.
            fixes.append(
                (
                    "validate on fewer batches (validation_steps), or less often "
                    if fewer
                    else "validate less often "
                )
                + f"(fit(validation_freq=k)) with {' and '.join(watchers)}'s patience counted "
                "in validations: they watch the validation loss"
            )
        else:
            fixes.append(
                "validate less often (fit(validation_freq=k))"
                + (" or on fewer batches (validation_steps)" if fewer else "")
            )
    if histograms and not histograms_first:
        fixes.append(histogram_fix)
    if dataset_fix and not dataset_first:
        fixes.append(dataset_fix)
    if per_call:
        batches = int(fit.get("steps_per_epoch") or 0)
        if 0 < batches <= FEW_BATCHES:
            # fit(epochs=N) still sets up each epoch (its iterator, its callbacks): a stateful
            # LSTM's 23-batch fit calls took 153 ms each, 126 ms an epoch in one fit(epochs=10)
            # and 48 ms with train_on_batch, without the profiler.
            fixes.append(
                f"for its {batches} batches an iteration, model.train_on_batch(x, y) per batch, "
                "which has no per-call set-up (one fit(epochs=...) still sets up every epoch: "
                "a stateful LSTM's 23-batch iterations took 153 ms each as written, 126 ms in "
                "one fit, 48 ms with train_on_batch, without the profiler), or call fit once "
                f"for the loop's {calls} iterations (fit(epochs={calls}), the per-iteration "
                "work in a callback's on_epoch_end)"
            )
        else:
            fixes.append(
                f"call fit once for the loop's {calls} iterations (fit(epochs={calls}), the "
                "per-iteration work in a callback's on_epoch_end), or, for a few batches an "
                "iteration, model.train_on_batch, which has no per-call set-up"
            )
    board = _tensorboard_fix(fit)
    cheaper = [
        board
        if c == "TensorBoard" and board is not None
        else _checkpoint_fix(fit)
        if c == "ModelCheckpoint"
        else CALLBACK_FIX.get(c, c)
        for c in callbacks
        if c not in VAL_WATCHERS
        and c not in CHEAP_CALLBACKS
        and not (histograms and c == "TensorBoard")
        # Set as cheap as it goes: its epoch's scalars are all it writes there.
        and not (c == "TensorBoard" and board == "")
        # Timed and cheap: not worth naming.
        and (c not in ends or c in costly)
    ]
    if cheaper:
        # Only the callbacks the fit has (a fit with ModelCheckpoint and CSVLogger was told
        # of TensorBoard's update_freq).
        fixes.append(f"make the epoch-end callbacks cheaper ({'; '.join(cheaper)})")
    if not per_call:
        # A finite data set runs out at its end: longer epochs need it repeated (the time
        # series tutorial's window dataset was told "steps_per_epoch larger than 437" as is).
        repeats = any(
            tfdata.repeats_data([str(st.get("kind")) for st in p.get("stages") or ()])
            for p in script.get("pipelines") or ()
        )
        fixes.append(
            f"run fewer, longer epochs (steps_per_epoch larger than {e.steps_per_epoch}, "
            + (
                "epochs fewer: the same batches)"
                if repeats
                else "epochs fewer, over the data "
                "repeated with .repeat(): fit stops where the data ends)"
            )
        )
    f["epoch_fix"] = "; ".join(fixes)


#: A shuffle buffer of fewer elements than this refills too fast to be named.
REFILL_MIN = 1_000
#: A shuffle of a source's own elements (no map before it) of at least this many is named.
REFILL_ELEMENTS = 5_000


def _shuffle_refill(script: Mapping[str, Any]) -> tuple[str, str] | None:
    """(what, fix) where the script's own tf.data pipeline shuffles after a map with no cache
    between them: each epoch's first batch waits for the shuffle buffer to fill through the map
    (6,000 JPEG records decoded, then shuffle(10000): ~1 s at each epoch's start against 33 ms
    batches, 17% of the epoch without the profiler; 0.04 s with the records shuffled before
    the map, or a cache after it)."""
    for pipe in script.get("pipelines") or ():
        if input_rules.keras_made(pipe):
            continue
        stages = list(pipe.get("stages") or ())
        found = tfdata.shuffles_after_map([str(st.get("kind")) for st in stages])
        if found is None:
            continue
        last_map, i = found
        size = str(stages[i].get("detail") or "").strip()
        # The script's own map (timeseries_dataset_from_array's windowing map, then its
        # shuffle(256), is the library's) and a buffer worth its refill.
        where = str(stages[last_map].get("function") or "")
        own = str(script.get("path") or "").rsplit("/", 1)[-1]
        if not own or f"({own}:" not in where:
            continue
        if size.isdigit() and int(size) < REFILL_MIN:
            continue
        buffer = f"shuffle({size})" if size else "shuffle"
        return (
            f"the {buffer} buffer, refilled through the map at each epoch's start (each "
            "epoch's first batch waits for it)",
            f"shuffle before the map (the records or file names, not the mapped elements: "
            f".shuffle(...) then .map(...)), or cache the mapped elements before the "
            f"shuffle (.map(...).cache().{buffer}) where they fit in memory, or a smaller "
            "buffer",
        )
    return _big_shuffle(script)


def _big_shuffle(script: Mapping[str, Any]) -> tuple[str, str] | None:
    """(what, fix) where the script's own pipeline shuffles ``REFILL_ELEMENTS`` or more of its
    source's elements before batching them (no map between): each epoch's first batch waits for
    the buffer to fill again (TensorFlow's structured-data tutorial, shuffle(len(dataframe)) of
    9,229 rows of 16 features: its first batch 61 ms, an epoch's batches 134 ms; shuffling
    indices and gathering each batch, 28 and 52 ms; shuffle(1024), 13 and 98 ms, without the
    profiler; its epoch boundary had been named "validation every epoch ... 49%", the
    validation 0% of an epoch measured)."""
    for pipe in script.get("pipelines") or ():
        if input_rules.keras_made(pipe):
            continue
        kinds = [str(st.get("kind")) for st in pipe.get("stages") or ()]
        if "shuffle" not in kinds or "batch" not in kinds:
            continue
        i, b = kinds.index("shuffle"), kinds.index("batch")
        # The source's own elements: no map before the batch (records shuffled before their
        # parsing map are the cheap order), no cache before the shuffle.
        if b < i or "map" in kinds[:b] or "cache" in kinds[:i]:
            continue
        size = str((pipe.get("stages") or ())[i].get("detail") or "").strip()
        if not size.isdigit() or int(size) < REFILL_ELEMENTS:
            continue
        return (
            f"the shuffle({int(size):,}) buffer of the dataset's elements, filled again before "
            "each epoch's first batch",
            "shuffle indices, not the elements: tf.data.Dataset.range(n).shuffle(n).batch(b)"
            ".map(a gather of each batch's rows from the arrays held as tensors) (9,229 rows of "
            "16 features: 28 ms to an epoch's first batch against 61 ms, its batches 52 ms "
            "against 134 ms, without the profiler), or a smaller buffer (shuffle(1024): 13 ms)",
        )
    return None


#: Callbacks that read the validation loss at each epoch's end.
VAL_WATCHERS = frozenset({"EarlyStopping", "ReduceLROnPlateau"})
#: A callback whose epoch end takes this share of the boundary's excess is named with its time.
CALLBACK_NAMED = 0.05


def _int_or(v: Any, default: int) -> int:
    """``v`` as a whole number where it is one (fit's batch size), else ``default``."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def epoch_end_ms(fit: Mapping[str, Any]) -> dict[str, float]:
    """Each of the script's callbacks' median epoch end (ms) as written (``fit.epoch_ends``:
    those a phase instrumented or altered left out, and the first, which may trace or create a
    file), by class name."""
    by: dict[str, list[float]] = {}
    seen: set[str] = set()
    for name, ms, altered in fit.get("epoch_ends") or ():
        first = name not in seen
        seen.add(name)
        if not altered and not first:
            by.setdefault(str(name), []).append(float(ms))
    return {k: sorted(v)[len(v) // 2] for k, v in by.items()}


#: Keras's callbacks whose epoch-end work is a few lines written (CSVLogger: 0.07 ms an epoch
#: without the profiler, against a checkpoint's 28-39 ms).
CHEAP_CALLBACKS = frozenset({"CSVLogger", "TerminateOnNaN", "LearningRateScheduler", "History"})


#: What makes a Keras callback's epoch end cheaper; another callback is named as it is.
def _checkpoint_fix(fit: Mapping[str, Any]) -> str:
    """ModelCheckpoint's fix with only the settings the script did not give it (``fit.ckpt_*``;
    a distributed-training tutorial's save_weights_only=True checkpoint was told to set
    save_weights_only=True)."""
    if "ckpt_weights_only" not in fit:
        return CALLBACK_FIX["ModelCheckpoint"]
    ways = []
    if fit.get("ckpt_save_freq", "epoch") == "epoch":
        ways.append("every few epochs (save_freq in batches)")
    if not fit.get("ckpt_weights_only"):
        ways.append("save_weights_only=True")
    if not fit.get("ckpt_best_only"):
        ways.append("save_best_only=True")
    if not ways:
        return "ModelCheckpoint: a larger save_freq"
    return (
        "ModelCheckpoint: " + (", ".join(ways[:-1]) + ", or " if len(ways) > 1 else "") + ways[-1]
    )


CALLBACK_FIX = {
    "TensorBoard": "TensorBoard: update_freq='epoch', profile_batch=0",
    "ModelCheckpoint": "ModelCheckpoint: every few epochs (save_freq in batches), "
    "save_weights_only=True, or save_best_only=True",
    "BackupAndRestore": "BackupAndRestore: save_freq in batches, every few epochs",
}


#: The callbacks' timed epoch ends under this share of a boundary's excess leave most of it
#: to what was not timed apart.
TIMED_PART = 0.5


def _untimed_rest(
    fit: Mapping[str, Any],
    work: list[str],
    callbacks: list[str],
    ends: Mapping[str, float],
    excess_ns: float,
) -> tuple[str, str] | None:
    """(what the boundary's work adds, a fix or "") where the callbacks are all it names and
    their epoch ends, timed as written, are under ``TIMED_PART`` of its excess: the rest is
    fit's own epoch end and the next epoch's set-up, with the script's tf.distribute strategy
    named. A one-device MirroredStrategy fit's boundary of 10.3 s, its four callbacks 35 ms
    together, read "the callbacks ... cost 51% of the training time"; without the profiler its
    boundaries took 0.1-29 s with the strategy and 0.03-0.10 s without it."""
    if len(work) != 1 or not callbacks or any(c not in ends for c in callbacks):
        return None
    timed_ns = sum(ends.values()) * 1e6
    if timed_ns >= TIMED_PART * excess_ns:
        return None
    strategy = str(fit.get("strategy") or "")
    replicas = fit.get("strategy_replicas")
    under = ""
    fix = ""
    if strategy:
        under = f" under its {strategy}" + (
            f" ({replicas} replica{'s' if replicas != 1 else ''})" if replicas else ""
        )
    if strategy and replicas == 1:
        fix = (
            f"with one device, no strategy: a {strategy} over one replica distributes nothing, "
            "and its per-epoch set-up is not timed apart on this loop (a one-device "
            "MirroredStrategy fit's boundaries took 0.1-29 s, 0.03-0.10 s without it, measured "
            "without the profiler)"
        )
    return (
        f" (their epoch ends {timed_ns / 1e6:,.1f} ms of the {excess_ns / 1e6:,.1f} ms, timed as "
        "written) and, not timed apart, fit's own epoch end and the next epoch's set-up"
        f"{under}",
        fix,
    )


def _tensorboard_fix(fit: Mapping[str, Any]) -> str | None:
    """What makes the fit's TensorBoard cheaper, from its settings (``tb_*``, recorded by the
    capture): "" where it writes only each epoch's scalars already (Keras 3's defaults: a
    word2vec fit with a default TensorBoard was told "update_freq='epoch', profile_batch=0",
    which changed nothing; removing it saved 0.01 s of 1.35 s without the profiler); None
    where its settings were not recorded."""
    if "tb_update_freq" not in fit:
        return None
    parts = []
    freq = fit.get("tb_update_freq")
    if freq != "epoch":
        parts.append(f"update_freq='epoch' (it writes every {freq} batches)")
    if fit.get("tb_profiling"):
        parts.append("profile_batch=0 (it profiles batches)")
    if fit.get("tb_write_images"):
        parts.append("write_images=False")
    if fit.get("tb_embeddings_freq"):
        parts.append("embeddings_freq=0")
    return f"TensorBoard: {', '.join(parts)}" if parts else ""


#: A Keras call made about once an epoch boundary (calls over boundaries within this factor of
#: one) that takes at least ``BOUNDARY_CALL_SHARE`` of a boundary's excess is named there.
BOUNDARY_CALL_SPREAD = 1.5
BOUNDARY_CALL_SHARE = 0.2


def _boundary_calls(trace: Any, boundaries: int, excess_ns: float) -> tuple[str, str] | None:
    """(what, fix) for the evaluate or predict calls the script makes once a boundary and
    that hold a part of its excess; None without one."""
    if boundaries < 2 or excess_ns <= 0:
        return None
    calls = ((trace.script or {}).get("keras_calls")) or {}
    for name in ("evaluate", "predict"):
        c = calls.get(name) or {}
        n = int(c.get("calls") or 0)
        if not n or not 1 / BOUNDARY_CALL_SPREAD <= n / boundaries <= BOUNDARY_CALL_SPREAD:
            continue
        # The median call where recorded (a phase that altered the model slowed a few).
        each_ns = float(c.get("median_ms") or float(c.get("ms") or 0.0) / n) * 1e6
        if each_ns < BOUNDARY_CALL_SHARE * excess_ns:
            continue
        typical = "the median call" if c.get("median_ms") else "a call"
        what = f"model.{name}, called {n} times ({each_ns / 1e6:,.0f} ms {typical}, timed)"
        fix = (
            "validate inside fit (validation_data=..., validation_freq=k: once every k epochs) "
            "instead of a model.evaluate call after each"
            if name == "evaluate"
            else "predict less often, or with model(x, training=False) on a batch"
        )
        return what, fix
    return None


#: A compute-bound step's advice; a script already in mixed precision is told what that
#: policy does on this device instead.
COMPUTE_FIX = (
    "There is little overhead to remove: a faster step needs less arithmetic (a smaller model "
    "or input; smaller batches make a step shorter, not an epoch) or faster kernels (more "
    "cores; XLA with "
    "jit_compile=True or mixed precision: try each on this loop and keep it only if the step "
    "is faster, as on a CPU either can be slower)."
)


#: The part of a compute-bound fix that names XLA (taken out where XLA measured slower).
XLA_CLAUSE = "; XLA with jit_compile=True: time it, as on a CPU it can be slower"
#: Its words for a TF1 session's graph, which has no jit_compile and no Keras policy (a
#: TF1 convnet built from tf.nn ops was told of both).
XLA_CLAUSE_TF1 = (
    "; XLA auto-clustering of the session's graph (on a CPU, the environment variable "
    "TF_XLA_FLAGS='--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit' set before TensorFlow is "
    "imported): time it, as on a CPU it can be slower"
)
BF16_TF1 = (
    "the graph's weights, inputs and ops in tf.bfloat16 (tf.cast where the graph is built, the "
    "loss in float32)"
)


def xla_on_clause(how: str) -> str:
    """The compute-bound fix's XLA part where the step compiles with XLA already."""
    return (
        f"; this step compiles with XLA already ({how}): time it without (jit_compile=False), "
        "as on a CPU XLA can be slower (the image classification example's convnet: 2.5x)"
    )


def _compute_fix(
    policy: str | None, arith: list[str] | None = None, tf1: bool = False, xla: str = ""
) -> str:
    """``COMPUTE_FIX``, or for a script whose Keras dtype policy is a mixed one, what to
    measure against it (the mixed-precision guide's Dense(4096) model under mixed_float16 ran
    1.2-1.3x slower than float32 on this CPU, mixed_bfloat16 2x faster, measured without the
    profiler).

    Where the CPU's arithmetic flags were read (``script.cpu_arith``), the precision named is
    the one it computes natively: "mixed precision" read as Keras's mixed_float16 (the
    guide's) ran the Keras VAE example 4x slower on this CPU (avx512_bf16, no float16), and
    mixed_bfloat16 2x faster (65 against 129 ms a step), without the profiler."""
    if (not policy or not policy.startswith("mixed_")) and arith is not None:
        bf16 = [a for a in arith if "bf16" in a]
        fp16 = [a for a in arith if "fp16" in a]
        if bf16 and tf1:
            precision = (
                f"bfloat16 arithmetic, which this CPU does natively ({', '.join(bf16)}): "
                + BF16_TF1
            )
        elif bf16:
            precision = (
                "bfloat16 arithmetic, which this CPU does natively "
                f"({', '.join(bf16)}): Keras's mixed_bfloat16 policy "
                "(keras.mixed_precision.set_global_policy('mixed_bfloat16') before the model "
                "is built, its output layer in float32 (dtype='float32'), as the mixed "
                "precision guide does: a top-k accuracy metric fails on bfloat16 outputs; a "
                "layer that creates float32 tensors itself must then follow its inputs' dtype)"
                + (
                    ""
                    if fp16
                    else ", not mixed_float16, which this CPU cannot compute natively and runs "
                    "slower than float32"
                )
            )
        elif fp16:
            precision = (
                f"float16 arithmetic, which this CPU does natively ({', '.join(fp16)}): "
                + ("the graph's ops in tf.float16" if tf1 else "Keras's mixed_float16 policy")
            )
        else:
            precision = ""
        return (
            "There is little overhead to remove: a faster step needs less arithmetic (a smaller "
            "model or input; smaller batches make a step shorter, not an epoch) or faster "
            "kernels (more cores"
            + (f"; {precision}" if precision else "")
            + (xla_on_clause(xla) if xla else XLA_CLAUSE_TF1 if tf1 else XLA_CLAUSE)
            + ")"
            + (
                ""
                if precision
                else "; mixed precision is unlikely to help here: this CPU has no bfloat16 or "
                "float16 arithmetic (avx512_bf16, amx_bf16, avx512_fp16), so its kernels would "
                "convert (mixed_float16 ran 1.2-4x slower than float32 on such a CPU)"
            )
            + "."
        )
    if not policy or not policy.startswith("mixed_"):
        return COMPUTE_FIX
    other = "mixed_bfloat16" if policy == "mixed_float16" else "mixed_float16"
    return (
        f"The script runs Keras's {policy} policy: its speed-up is a GPU's (or a CPU's with "
        f"native {policy.removeprefix('mixed_')} arithmetic); on a CPU without it the kernels "
        "convert and can be slower than float32. Time a few hundred steps with "
        "keras.mixed_precision.set_global_policy('float32') and with "
        f"'{other}' against this one, and keep the fastest; beyond that, a faster step needs "
        "less arithmetic or XLA (jit_compile=True: measure it too)."
    )


#: The row standing for XLA's compiled code, whose kernels the tracer does not see on a CPU.
XLA_ROW = "XLA-compiled code"


def _compute_facts(f: dict[str, Any], trace: Any) -> None:
    """The kernels' share, the top kernels, and (where counted) the rate against the peak."""
    fw = trace.data("framework")
    step, compute = f["step_us"], f["compute_us"]
    if compute is None or not step:
        return
    f["compute_pct"] = 100 * compute / step
    table = (fw.xplane_op_table or fw.op_table) if fw is not None else None
    # The step's own kernels: those on the input pipeline's threads ran beside the steps (a
    # PyDataset's __getitem__ as a PyFunc, 40% of the kernel time of a conv net's fit, was
    # "compute-bound ... the top kernels are PyFunc 40%"); the step waits for them as input.
    rows = [r for r in table.rows if not r.input_thread] if table is not None else []
    if rows:
        purpose_rows = [(r.kernel, r.op, r.share) for r in rows]
        if f.get("xla_unseen") and table is not None and table.steps:
            # XLA's compiled code ran the arithmetic unseen: it is a row of its own, its time
            # the compute less the kernels seen (the image classification example's
            # jit_compile=True step, 560 ms of compute, read "73% of each step is kernels for
            # input pipeline ... MakeIterator 90%" from the 36 ms of kernels the tracer saw).
            # The compute is that code and the arithmetic kernels seen; the input pipeline's
            # kernels on the step's threads (an epoch's MakeIterator) are rows of their own.
            per_step = table.steps * f["units_per_step"] * 1e3
            arith_us = (
                sum(r.total_ns for r in rows if not attribution.is_data_kernel(r.kernel)) / per_step
            )
            seen_us = sum(r.total_ns for r in rows) / per_step
            unseen = max(compute - arith_us, 0.0)
            total_us = seen_us + unseen
            if total_us > 0:
                purpose_rows = [(r.kernel, r.op, r.total_ns / per_step / total_us) for r in rows]
                purpose_rows.append((XLA_ROW, "", unseen / total_us))
        total = sum(r[2] for r in purpose_rows) or 1.0
        by_kernel: dict[str, float] = {}
        for kernel, _, share in purpose_rows:
            by_kernel[kernel] = by_kernel.get(kernel, 0.0) + share / total
        ranked = sorted(by_kernel.items(), key=lambda kv: -kv[1])
        # Kernels under 1% are not worth naming beside a larger one ("XLA-compiled code 94%,
        # OptionalHasValue 0%").
        top = [kv for kv in ranked[:3] if kv[1] >= 0.01] or ranked[:1]
        f["top_kernels"] = ", ".join(f"{k} {100 * s:.0f}%" for k, s in top)
        _slow_backprop(f, by_kernel, (getattr(trace, "script", None) or {}).get("onednn"))
        full = fw.full_trace if fw is not None else None
        _purpose_facts(f, purpose_rows, compute, full.beside if full else ())
        if f.get("purpose_kernels") and f.get("purpose_share_pct", 0.0) >= 5:
            # The top kernels are the model's arithmetic; the other kernels are said as what
            # they are for (a fit checkpointing every 20-batch epoch read "compute-bound ...
            # the top kernels are MakeIterator 30%", the epochs' iterators).
            arith = [
                (k, v)
                for k, v in sorted(by_kernel.items(), key=lambda kv: -kv[1])
                if purposes.purpose(k) == purposes.ARITHMETIC
            ][:3]
            f["top_kernels"] = (
                ", ".join(f"{k} {100 * v:.0f}%" for k, v in arith) or "none of the arithmetic"
            ) + f"; {f['purpose']} {f['purpose_share_pct']:.0f}% ({f['purpose_kernels']})"
    flops = f.get("flops") or (
        fw.flops_per_step // f["units_per_step"] if fw and fw.flops_per_step else None
    )
    # Fewer flops than a few per kernel run are a count that missed the work: TensorFlow's
    # count does not enter a tf.while_loop's body (TF's DeepDream tutorial, a loop of
    # gradient-ascent steps in one tf.function: "4 flops at 0.0 GFLOP/s, 0% of this machine's
    # 43 GFLOP/s" over 1.27 s of conv kernels).
    launched = fw.median_ns.kernels if fw is not None and fw.median_ns is not None else 0
    if flops and launched and flops < FLOPS_PER_KERNEL * launched:
        f["flops_missed"] = True
        flops = None
    # A rate above the measured peak means the peak was measured while the machine was busy
    # (864% of it once, beside another process): no rate against it is quoted then.
    if (
        flops
        and fw is not None
        and fw.peak_gflops
        and compute > 0
        and flops / compute / 1e3 <= PEAK_SLACK * fw.peak_gflops
        # Far below the peak, the count is the one that missed work, not the kernels: a step
        # of several train_on_batch and predict calls (Keras-GAN's DCGAN) read "221,086,039
        # flops at 0.8 GFLOP/s, 1% of this machine's 108 GFLOP/s" for ~21 GFLOP by hand.
        and flops / compute / 1e3 >= PEAK_LEAST * fw.peak_gflops
    ):
        f["gflops"] = flops / compute / 1e3
        f["peak_gflops"] = fw.peak_gflops
        f["peak_pct"] = 100 * f["gflops"] / fw.peak_gflops
        f["step_flops"] = flops
        # Above the peak (by PEAK_SLACK at most) reads as impossible: a kernel beat the
        # matmul benchmark a little, or the benchmark met other work (Keras's style transfer:
        # "119% of this machine's 95 GFLOP/s", 102% of 72 beside a busy process).
        f["peak_said"] = (
            f"{f['peak_pct']:.0f}% of this machine's {fw.peak_gflops:,.0f} GFLOP/s float32 matmul"
            if f["peak_pct"] <= 100
            else f"about this machine's {fw.peak_gflops:,.0f} GFLOP/s float32 matmul (its "
            "peak as measured, which other work on the cores lowers)"
        )


#: A convolution's backprop kernel holding this share of the kernels or more ...
BACKPROP_SHARE = 0.5
#: ... and this many times the forward convolutions' time: far more than the same arithmetic
#: needs (about 1-2x), TensorFlow's own kernel slow for those shapes on this CPU.
BACKPROP_OVER_FORWARD = 10.0
BACKPROP_KERNELS = ("Conv2DBackpropInput", "Conv2DBackpropFilter")
FORWARD_KERNELS = ("Conv2D", "FusedConv2D", "_FusedConv2D", "DepthwiseConv2dNative")


def _slow_backprop(f: dict[str, Any], by_kernel: Mapping[str, float], onednn: Any) -> None:
    """A convolution's backprop kernel far slower than the forward convolutions, where
    TensorFlow ran without oneDNN's kernels: the compute fix names TF_ENABLE_ONEDNN_OPTS=1.
    Keras's WGAN-GP: Conv2DBackpropInput 80-85% of its step, 244 ms against the same layer's
    forward 5.6 ms (43x); with TF_ENABLE_ONEDNN_OPTS=1 that kernel took 17.8 ms and the step
    was 3.3-3.5x faster, without the profiler. (On a CNN and a DCGAN generator whose backprop
    is 1-2x the forward, oneDNN changed the step by -24% to +14%: not said there.)"""
    if onednn is not False:
        return
    kernel, share = max(
        ((k, by_kernel.get(k, 0.0)) for k in BACKPROP_KERNELS), key=lambda kv: kv[1]
    )
    forward = sum(by_kernel.get(k, 0.0) for k in FORWARD_KERNELS)
    if share < BACKPROP_SHARE or not forward or share < BACKPROP_OVER_FORWARD * forward:
        return
    f["compute_fix"] = (
        "Run the script with TF_ENABLE_ONEDNN_OPTS=1 in its environment (oneDNN's kernels, "
        "which this process ran without: TensorFlow turns them on by default only on some "
        f"CPUs) and time a few steps each way: {kernel} takes {share / forward:.0f}x the "
        f"forward convolutions' time ({100 * share:.0f}% of the kernels against "
        f"{100 * forward:.0f}%), far more than the same arithmetic needs, TensorFlow's own "
        "kernel being slow for these shapes on this CPU (Keras's WGAN-GP, its "
        "Conv2DBackpropInput 43x its forward, ran its step 3.3-3.5x faster with oneDNN's, "
        "without the profiler). " + f["compute_fix"]
    )


#: The fewest flops a step's count may hold per kernel it ran before it is taken for a count
#: that missed the work (no arithmetic kernel does fewer).
FLOPS_PER_KERNEL = 10
#: Batches an iteration of a fit-per-iteration loop up to which train_on_batch is the first
#: fix (one fit still sets up each epoch).
FEW_BATCHES = 64
#: How far above this machine's measured peak a step's rate may be before the peak is taken
#: for a figure measured under load (a kernel may beat a matmul benchmark by a little).
PEAK_SLACK = 1.2
#: A rate under this share of the peak is taken for a count that missed the step's work.
PEAK_LEAST = 0.02


def _per_op_fix(f: dict[str, Any]) -> None:
    """``per_op_bound``'s fix: XLA fuses the ops, unless the step calls Python through
    tf.py_function, which XLA cannot compile (TensorFlow's actor-critic tutorial, its CartPole
    step in tf.numpy_function: jit_compile=True raised "Detected unsupported operations ...
    PyFunc", where the verdict led with XLA)."""
    calls = f.get("py_step_calls")
    if calls:
        f["per_op_fix"] = (
            f"Fewer, larger ops: write the Python the step calls through tf.py_function "
            f"({calls}) in TensorFlow ops, and XLA (jit_compile=True) can then fuse the step's "
            "ops (it cannot compile a graph that calls Python; measure it on this loop and keep "
            "it only if the step is faster); larger batches make each op do more for the same "
            "per-op cost."
        )
        return
    f["per_op_fix"] = (
        "Fewer, larger ops: XLA (jit_compile=True) fuses them (measure it on this loop and "
        "keep it only if the step is faster), larger batches make each op do more for the same "
        "per-op cost, and a smaller unroll or a fused layer (a recurrent layer's cuDNN kernel "
        "on a GPU) runs fewer ops."
    )


def _slow_facts(f: dict[str, Any], trace: Any) -> None:
    """Steps much slower than the others in the measured windows (each step against its own
    window's median: ``stats.slow_steps_across``): how many, how much slower, the share of the
    time beyond the median they hold, and their period where they have one (an evaluation
    every Nth step or every epoch of a custom loop, a checkpoint, logging)."""
    timed = trace.phase("timed")
    if timed is None or timed.window is None:
        return
    slow = stats.slow_steps_across(trace)
    if slow is None or not slow.median_ns:
        return
    per_epoch = ((trace.script or {}).get("fit") or {}).get("steps_per_epoch")
    if slow.period is not None and per_epoch and slow.period == per_epoch:
        return  # an epoch's boundary: per_epoch_cost says what runs there
    f["slow_count"] = slow.count
    f["slow_us"] = slow.slow_ns / 1e3
    f["slow_factor"] = slow.slow_ns / slow.median_ns
    f["slow_excess_pct"] = 100 * slow.excess_share
    # What the slow steps add to the loop, per step: their share of the loop's time times the
    # mean step (the typical step leaves them out: times it, checkpoints every 10th step
    # holding 75% of the loop ranked below a per-call finding of the typical step).
    # The mean step of the timed window (uninstrumented) where it holds a few periods: the
    # instrumented windows' steps are slower (a TF1 graph-growth loop's read 16.5 ms a step
    # for a 10 ms truth across all windows, 7.9 ms at the timed window's mean).
    timed_steps = list(timed.window.durations_ns())
    mean = slow.mean_ns
    if timed_steps and len(timed_steps) >= 3 * max(slow.period or 0, 2):
        mean = sum(timed_steps) / len(timed_steps)
    f["slow_excess_us"] = slow.excess_share * mean / 1e3
    f["slow_period"] = slow.period or 0
    f["slow_first"] = slow.first
    line = _slow_line_record(trace, slow.period or 0, slow.slow_ns - slow.median_ns)
    f["slow_what"] = _line_text(line) or (
        f"Something runs every {slow.period or 0} steps besides the training step (an "
        "evaluation, a checkpoint, logging or a summary)"
    )
    f["slow_fix"] = _slow_fix(line[0].source if line else "", slow.period or 0, f["framework"])
    hooks = _hooks_at((trace.script or {}).get("session_hooks") or (), slow.period or 0)
    if hooks is not None and line is None:
        f["slow_what"], f["slow_fix"] = hooks
    if line is None and _pass_starts(trace, slow.period or 0):
        f["slow_what"], f["slow_fix"] = (
            f"Each is the first step of a pass over the steps' loop (every {slow.period} "
            "steps): the loop's iterable made anew, its first element waited for (a "
            "tf.data pipeline's set-up: a generator started again, its files opened)",
            PASS_START_FIX,
        )
    if slow.excess_share >= SLOW_HOLD_SAMPLED:
        _slow_update(f, trace, slow.period or 0, line is not None, slow.mean_ns)
    # The slow steps' line calls the Keras method predict_in_loop names (a GAN's
    # generator.predict once an iteration of three train_on_batch steps): that finding's.
    named = call_rules.looped(f)
    f["slow_by_call"] = bool(named and line is not None and named in line[0].source)


#: The fix for slow first steps of the passes over the loop's iterable.
PASS_START_FIX = (
    "iterate one stream across the passes (make the iterator once, over the data repeated: "
    "it = iter(ds.repeat()), and take each pass's steps with itertools.islice(it, n)), or make "
    "the set-up cheaper (the files opened in parallel, tf.data.Dataset.interleave with "
    "num_parallel_calls; the generator's start outside its loop; .cache() after it)"
)


def _pass_starts(trace: Any, period: int) -> bool:
    """Whether the run's long steps at ``period`` are mostly the first steps of the passes
    over the steps' loop (``script.long_steps``: the passes' length is the period). TF's data
    performance guide's naive pipeline: its generator sleeps to "open a file" at each 3-sample
    epoch's start, read "Something runs every 3 steps besides the training step (an
    evaluation, a checkpoint, logging or a summary)"."""
    record = (trace.script or {}).get("long_steps") or {}
    length = int((record.get("passes") or {}).get("length") or 0)
    rows = record.get("steps") or ()
    starts = sum(1 for r in rows if r.get("after_pass_end"))
    return period > 1 and length == period and starts >= 3 and 2 * starts > len(rows)


#: Slow steps holding this share of the loop's time or more: the sampled steps' stacks are
#: mostly theirs, and say what they run where no line was timed.
SLOW_HOLD_SAMPLED = 0.5
#: ... a training update holding this share of the samples inside steps is what they run.
UPDATE_SAMPLED = 0.2


#: What sets each of TensorFlow's session hooks' period, as a MonitoredTrainingSession's
#: argument or the hook's own.
HOOK_SETTINGS = {
    "CheckpointSaverHook": "MonitoredTrainingSession(save_checkpoint_steps=...)",
    "SummarySaverHook": "MonitoredTrainingSession(save_summaries_steps=...)",
    "StepCounterHook": "MonitoredTrainingSession(log_step_count_steps=...)",
    "LoggingTensorHook": "LoggingTensorHook(every_n_iter=...)",
}


def _hooks_at(hooks: Any, period: int) -> tuple[str, str] | None:
    """(what, fix) where a MonitoredTrainingSession's hooks run at the slow steps' period (or
    a multiple of it): a TF1 loop with save_checkpoint_steps=200, save_summaries_steps=100 and
    a LoggingTensorHook every 100 read "Something runs every 100 steps besides the training
    step (an evaluation, a checkpoint ...)" (its hooks 6-12% of the loop, measured)."""
    if period < 2:
        return None
    at = [h for h in hooks if h.get("every_steps") == period]
    multiple = [
        h
        for h in hooks
        if h.get("every_steps") and h["every_steps"] > period and h["every_steps"] % period == 0
    ]
    if not at:
        return None
    names = ", ".join(h["hook"] for h in at)
    more = "".join(f"; {h['hook']} every {h['every_steps']:,}" for h in multiple)
    settings = sorted(
        {HOOK_SETTINGS[h["hook"]] for h in at + multiple if h["hook"] in HOOK_SETTINGS}
    )
    return (
        f"The MonitoredTrainingSession's hooks run every {period} steps ({names}{more})",
        "run them less often"
        + (f": larger periods in {' and '.join(settings)}" if settings else "")
        + "; a step's own cost does not change it",
    )


def _slow_update(
    f: dict[str, Any], trace: Any, period: int, named: bool = False, mean_ns: float = 0.0
) -> None:
    """The periodic slow steps' work where no line was timed and the sampled steps' stacks,
    mostly theirs, run a training update: a DQN's update every 4 frames (Keras's example, eager:
    36% of the samples in tape.gradient and apply_gradients) was "Something runs every 4 steps
    besides the training step (an evaluation, a checkpoint ...): run it less often"; in a
    tf.function its loop took 76% less time without the profiler."""
    rec = trace.phase("sampled")
    got = sampling.update_share(rec.samples) if rec is not None and rec.samples else None
    if got is None or got.share < UPDATE_SAMPLED:
        return
    eager = got.eager >= 0.5
    what = (
        "The slow steps run the model's training update (in tape.gradient and apply_gradients "
        f"{100 * got.share:.0f}% of the sampled steps' time{', run eagerly' if eager else ''})"
    )
    fix = (
        "make it cheaper, not rarer"
        + (
            ": put the forward pass under the tape, tape.gradient and apply_gradients in one "
            "tf.function (eagerly they run op by op)"
            if eager
            else ""
        )
        + (
            f"; it trains the model once every {period} steps, and running it less often "
            "changes the training"
            if period > 1
            else "; it is the model's training, and running it less often changes it"
        )
    )
    # The periodic finding says it where no line of the slow steps was timed; else (a timed
    # line, such as a DQN's target predict in the same steps, names them) slow_steps_update.
    f["update_what"], f["update_fix"] = what, fix
    f["update_apart"] = named or period <= 1
    if not named:
        f["slow_what"], f["slow_fix"] = what, fix
    timed = trace.phase("timed")
    window = getattr(timed, "window", None)
    steps = list(window.durations_ns()) if window is not None else []
    f["update_us"] = got.share * (sum(steps) / len(steps) if steps else mean_ns) / 1e3


def _slow_fix(source: str, period: int, framework: str) -> str:
    """The periodic slow steps' fix: less often, unless their line trains the model (gradient
    accumulation's apply_gradients every 4 micro-batches: less often changes the training; a
    cheaper update is the fix there: an eager apply_gradients and reset, 13.5 ms, took 0.9 ms
    in a tf.function without the profiler, where it was told "run it less often ... a step's
    own cost does not change it")."""
    if not step_lines.TRAINING_LINE.search(source or ""):
        return (
            "run it less often, on fewer samples, or outside the loop; a step's own cost does "
            "not change it"
        )
    return (
        f"it updates the model once every {period} steps (accumulated gradients): running it "
        "less often changes the training; make the update cheaper instead"
        + (
            " (in a tf.function, as the training step is: eagerly it runs op by op)"
            if framework == "tf2"
            else ""
        )
    )


#: The slow steps at a period hold at least this share of the loop's time (%) to be named: the
#: period itself is the evidence (80% of one offset's steps slow, beyond chance), so a small
#: cost is still a measured one (min-char-rnn's sample() every 100 steps, 6% of the loop
#: without the profiler, went unnamed at 20%).
PERIODIC_MIN_PCT = 5.0


#: The graph's new ops per slow step (ops a step times the slow steps' period) at least this:
#: the slow steps are those that run a new op (a new executor for it).
GRAPH_OPS_PER_SLOW = 0.75


def _graph_slow_facts(f: dict[str, Any]) -> None:
    """A growing TF1 graph whose new op makes one step in every N slow: those steps' excess is
    the growth's cost. A course-style loop creating ``tf.square(loss)`` every iteration and
    running it: every 2nd session.run 7x a normal one (a new executor for the new fetch), 77%
    of the loop's time, where tracing read 462 µs a step; the slow steps' finding said "run it
    less often", which cannot help."""
    tracing = f.get("tracing_us") or 0.0
    f["graph_cost_us"] = tracing
    # The timed steps may make no op (a graph grown by a test loop after the training): "0 µs
    # a step" read as a measured cost of none.
    f["graph_cost"] = (
        f"{tracing:,.0f} µs a step"
        if tracing >= 1
        else "its cost was not measured (under 1 µs a step of tracing in the timed steps)"
    )
    f["graph_slow"] = ""
    ops, period = f.get("ops_per_step"), f.get("slow_period") or 0
    if not ops or period < 2 or ops * period < GRAPH_OPS_PER_SLOW:
        return
    if f["slow_excess_us"] <= tracing:
        return
    f["graph_cost_us"] = f["slow_excess_us"]
    f["graph_cost"] = f"{f['slow_excess_us']:,.0f} µs a step"
    f["graph_slow"] = (
        f" (the steps that run a new op, one in every {period}, take "
        f"{f['slow_factor']:.1f}× a normal step: {f['slow_excess_pct']:.0f}% of the loop's time)"
    )
    f["slow_by_graph"] = True


#: A tf.function of the script's made anew at least this many times (the same name, each a
#: new function object traced at its first call) ...
RECREATED_MIN = 3


def _recreated_facts(f: dict[str, Any], trace: Any) -> None:
    """A tf.function the script defines inside its loop: each iteration makes a new function,
    traced again at its first call (a custom loop's ``@tf.function def train_step`` inside the
    epoch loop: 77% of the loop without the profiler, told "something runs every 32 steps ...
    run it less often"). Where the slow steps' period is the calls each function got, they are
    its traces, and their excess is its cost."""
    funcs = [fn for fn in (trace.script or {}).get("functions") or [] if fn.get("own")]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for fn in funcs:
        by_name.setdefault(str(fn.get("name")), []).append(fn)
    name, made = max(by_name.items(), key=lambda kv: len(kv[1]), default=("", []))
    if len(made) < RECREATED_MIN:
        return
    calls = sorted(int(fn.get("calls") or 0) for fn in made)[len(made) // 2]
    f["recreated_fn"] = name
    f["recreated_n"] = len(made)
    f["recreated_calls"] = calls
    period = int(f.get("slow_period") or 0)
    if period and calls and abs(period - calls) <= max(1, calls // 10):
        f["recreated_cost_us"] = f["slow_excess_us"]
        f["recreated_cost"] = (
            f"the steps that trace a new one, one in every {period}, take "
            f"{f['slow_factor']:.1f}× a normal step: {f['slow_excess_pct']:.0f}% of the loop's "
            "time"
        )
        f["slow_by_recreated"] = True
    else:
        f["recreated_cost_us"] = f.get("tracing_us") or 0.0
        f["recreated_cost"] = (
            f"{f['recreated_cost_us']:,.0f} µs a step of tracing"
            if f["recreated_cost_us"] >= 1
            else "its cost was not measured in the timed steps"
        )


#: A line runs in the slow steps when its executions per step are within this factor of one
#: per period, and each takes at least ``SLOW_LINE_SHARE`` of a slow step's excess.
SLOW_LINE_SPREAD = 1.5
SLOW_LINE_SHARE = 0.3


def _slow_line(trace: Any, period: int, excess_ns: float) -> str:
    """The script's line that runs once every ``period`` steps and takes most of the slow
    steps' excess, from the lines phase (a ``manager.save()`` run 29 times in 288 steps at
    36.6 ms a call, the steps 4.8 ms); "" where none does or the lines were not measured."""
    return _line_text(_slow_line_record(trace, period, excess_ns))


def _line_text(found: tuple[Any, int] | None) -> str:
    """``_slow_line``'s sentence for a line record and the lines phase's step count."""
    if found is None:
        return ""
    best, steps = found
    text = f" (`{best.source.strip()}`)" if best.source.strip() else ""
    return (
        f"Line {best.line}{text} runs {best.hits} times in {steps} steps, "
        f"{best.total_ns / best.hits / 1e6:,.1f} ms each time (the lines phase)"
    )


def _slow_line_record(trace: Any, period: int, excess_ns: float) -> tuple[Any, int] | None:
    """``_slow_line``'s line record and the lines phase's step count; None where none."""
    rec = trace.phase("lines")
    data = getattr(rec, "data", None) if rec is not None else None
    steps = int(getattr(data, "steps_profiled", 0) or 0)
    if period < 2 or not steps or rec is None or not rec.lines:
        return None
    # A line calling a function of the script that runs the steps holds steps, not the slow
    # steps' extra work (a GAN's iteration(epoch): three train_on_batch steps, once every 3).
    _calls, callers = step_lines.step_call_lines(trace, rec.lines)
    held = tuple(f"{fn.rsplit('.', 1)[-1]}(" for fn in callers if not fn.startswith("<"))
    best = None
    for ln in rec.lines:
        if not ln.hits or "-packages/" in ln.file or any(c in ln.source for c in held):
            continue
        per_step = ln.hits / steps
        if not 1 / (SLOW_LINE_SPREAD * period) <= per_step <= SLOW_LINE_SPREAD / period:
            continue
        if ln.total_ns / ln.hits < SLOW_LINE_SHARE * excess_ns:
            continue
        if best is None or ln.total_ns > best.total_ns:
            best = ln
    return (best, steps) if best is not None else None


#: The kernels tf.debugging.enable_check_numerics adds to every op.
DEBUG_KERNELS = re.compile(r"^(CheckNumerics(V2)?|DebugNumericSummary(V2)?|DebugIdentity(V2|V3)?)$")
#: Kernels that are not the model's arithmetic, as a share of kernel time, above which the
#: step is not called compute-bound and their purpose is the finding (TF's word embeddings
#: guide: its TextVectorization layer's kernels read 40% of the kernel time quiet, 58% beside
#: a busy process, and "compute-bound ... little overhead to remove" quiet, where moving the
#: layer into a cached map made the step 2.4x faster without the profiler).
OTHER_PURPOSE_SHARE = 0.3


def _purpose_facts(
    f: dict[str, Any],
    rows: list[tuple[str, str, float]],
    compute_us: float,
    beside: Sequence[BesideFetch] = (),
) -> None:
    """What the kernels are for (``profiler.analysis.purposes``), from (op type, op name,
    share) rows: the arithmetic's share of kernel time, and the largest other purpose with its
    kernels and its advice. ``beside``: a TF1 step's fetches the training does not need, with
    the ops only they need (their kernels are ``purposes.FETCHED``)."""
    total = sum(r[2] for r in rows) or 1.0
    # The kernels enable_check_numerics adds (check_numerics' own part of the kernel time).
    debug = sum(r[2] for r in rows if DEBUG_KERNELS.match(r[0])) / total
    f["debug_kernels_us"] = compute_us * debug
    fetched = {op for b in beside for op in b.ops}
    # Each row's purpose, once.
    classed = [
        (purposes.purpose(op_type, name, fetched), op_type, name, share)
        for op_type, name, share in rows
    ]
    shares: dict[str, float] = {}
    for p, _, _, share in classed:
        shares[p] = shares.get(p, 0.0) + share
    arith = shares.get(purposes.ARITHMETIC, 0.0) / total
    f["arithmetic_share"] = arith
    others = {k: v / total for k, v in shares.items() if k != purposes.ARITHMETIC}
    if not others:
        return
    what = max(others, key=lambda k: others[k])
    # Its kernels by type, a type it has only by its ops' names marked so ("OneHot in
    # write_summary": TF2's histogram summaries).
    by_type: dict[str, float] = {}
    for p, op_type, name, share in classed:
        if p != what:
            continue
        by_name = purposes.purpose(op_type) != what and what != purposes.FETCHED
        label = f"{op_type} in {_scope(name)}" if by_name else op_type
        by_type[label] = by_type.get(label, 0.0) + share / total
    kernels = [kv for kv in sorted(by_type.items(), key=lambda kv: -kv[1])[:3] if kv[1] >= 0.01]
    f["purpose"] = what
    f["purpose_share_pct"] = 100 * others[what]
    f["purpose_us"] = compute_us * others[what]
    f["purpose_step_pct"] = f["compute_pct"] * others[what]
    f["purpose_kernels"] = ", ".join(f"{k} {100 * v:.0f}%" for k, v in kernels)
    f["purpose_fix"] = purposes.ADVICE.get(what, "")
    setup = sum(v for k, v in by_type.items() if k in ITERATOR_SETUP)
    if what == purposes.INPUT and setup >= 0.5 * others[what]:
        # The iterator made at each epoch's (or fit call's) start, in the timed steps as the
        # epochs are short: a fit called 80 times in a loop read "MakeIterator 58% ... a
        # tf.data pipeline with map(num_parallel_calls) and prefetch", where its arrays were
        # Keras's to feed and one fit(epochs=80) was the fix.
        f["purpose_fix"] = ITERATOR_SETUP_FIX
    if what == purposes.FETCHED:
        # The fetches whose own ops ran, by name: the finding says which values to fetch less.
        # The fetches whose own ops hold a tenth of those kernels (a fetched loss's Mean, 0%
        # beside a forward pass over the whole data set, is not worth naming).
        ran = {name: share for p, _, name, share in classed if p == what}
        held = {b.fetch: sum(ran.get(op, 0.0) for op in b.ops) for b in beside}
        names = [n for n, v in held.items() if v >= 0.1 * shares[what]]
        listed = " and ".join(f"`{n}`" for n in names[:3]) or "them"
        f["purpose"] = f"{what} ({listed}, fetched with every training step)"
        f["purpose_fix"] = f["purpose_fix"].format(fetched=listed)


#: The kernels that make a dataset's iterator (once per epoch, per fit call).
ITERATOR_SETUP = frozenset({"MakeIterator", "AnonymousIteratorV2", "AnonymousIteratorV3"})
ITERATOR_SETUP_FIX = (
    "the iterator is made at each epoch's start (each fit call's), so fewer, longer epochs "
    "(one fit call for the whole loop, steps_per_epoch=None) make it less often; the "
    "pipeline itself is not the cost"
)


def _numerics_facts(f: dict[str, Any]) -> None:
    """What enable_check_numerics costs, where it is on: the step's overhead beside the
    kernels and its own kernels (``debug_kernels_us``: the debugger guide's MLP, 23% of its
    kernels in DebugNumericSummaryV2, read as "summaries" in a compute-bound step)."""
    overhead = f.get("overhead_us")
    if not f.get("check_numerics") or overhead is None or not f.get("step_us"):
        return
    debug = float(f.get("debug_kernels_us") or 0.0)
    f["numerics_us"] = overhead + debug
    kernels = f" and {debug:,.0f} µs of kernels of its own" if debug >= 1 else ""
    f["numerics_what"] = (
        f"its cost is among the {overhead:,.0f} µs beside the kernels{kernels}, "
        f"{100 * f['numerics_us'] / f['step_us']:.0f}% (its overhead not measured apart: the "
        "switch cannot be taken off a traced function)"
    )


def _switch_facts(f: dict[str, Any], script: Mapping[str, Any], trace: Any) -> None:
    """Debugging and reproducibility switches the script left on: ``check_numerics``
    (tf.debugging.enable_check_numerics: TensorFlow's debugger guide's MLP, 27 ms a step with
    it, 7 ms without, read "the graph executor's cost per op ... XLA"), and TensorFlow's
    kernels limited to fewer threads than the cores (``tf_intra``: a reproducibility recipe's
    set_intra_op_parallelism_threads(1), 1.4-2.6x slower fits without the profiler, read
    "compute-bound ... more cores")."""
    f["check_numerics"] = bool(script.get("check_numerics"))
    threads = script.get("tf_threads") or {}
    cpu = trace.data("timed") if hasattr(trace, "data") else None
    cores = int(getattr(cpu, "usable_cpus", 0) or 0)
    intra = int(threads.get("intra") or 0)
    if intra and cores > intra and f.get("compute_us"):
        f["tf_intra"] = intra
        f["tf_cores"] = cores
        # At best the kernels spread over the cores: an upper bound of the saving.
        f["tf_threads_us"] = f["compute_us"] * (1 - intra / cores)


#: The script's own Python between session.run calls is said apart from session.run's
#: machinery from this share of the step.
SCRIPT_PYTHON_SHARE = 0.1


def _call_overhead_facts(f: dict[str, Any]) -> None:
    """``session_overhead_us`` (TF1) and ``function_overhead_us`` (a ``tf.function`` step):
    the overhead that is the call's own, less the script's own Python between the calls (the
    hooks' Python outside session.run, or a line of the script beside the call that
    ``step_line`` names) and the wait for input between them (``input_us``: a tf.data
    iterator's ``next``), with the words saying so (``*_overhead_note``). word2vec's
    ``generate_batch`` and ``add_summary``, 18-25% and 10% of a step without the profiler, were
    "session.run's per-call machinery"; a train_on_batch loop's shuffled copy of its data set
    (91%) and a custom loop's ``next()`` on its dataset (23-26%) were "the tf.function call's
    per-call cost"."""
    overhead = f.get("overhead_us")
    if overhead is None or f.get("eager_switch"):
        return  # no graph is called: the overhead is the eager ops' (eager_switch)
    key, machinery = (
        ("function", "the tf.function call's per-call cost")
        if f.get("framework") == "tf2"
        else ("session", "session.run's per-call machinery")
    )
    f[f"{key}_overhead_us"] = overhead
    f[f"{key}_overhead_note"] = f": the rest is {machinery}"
    own = float(f.get("script_python_us") or 0.0)
    line_us = float(f.get("hot_line_us") or 0.0)
    named = (
        f.get("hot_line_beside_call")
        and not f.get("hot_line_rare")
        and step_lines.holds(f, 0.0)
        and line_us > 0
    )
    if named:
        own = max(own, line_us)
    if own >= overhead or (not named and own < SCRIPT_PYTHON_SHARE * f["step_us"]):
        own = 0.0
    waiting = min(float(f.get("input_us") or 0.0), max(overhead - own, 0.0))
    if waiting < SCRIPT_PYTHON_SHARE * f["step_us"]:
        waiting = 0.0
    if own <= 0 and waiting <= 0:
        return
    rest = max(overhead - own - waiting, 0.0)
    said = []
    if own > 0:
        where = f", line {f['hot_line']} among it (below)" if named else ""
        said.append(f"{own:,.0f} µs of it is the script's own Python between the calls{where}")
    if waiting > 0:
        said.append(f"{waiting:,.0f} µs waiting for input between the calls")
    f[f"{key}_overhead_us"] = rest
    f[f"{key}_overhead_note"] = f": {'; '.join(said)}; the rest, {rest:,.0f} µs, is {machinery}"


def _tracing_shown(f: Facts) -> bool:
    """Whether the tracing share's 95% interval excludes zero (no interval: its figure stands)."""
    low = f.get("tracing_low_pct")
    return low is None or low > 0


def _tracing_in_calls(f: Facts) -> bool:
    """Whether predict or evaluate calls inside the steps take as much of a step as its
    tracing: each call builds its dataset's functions anew, so the tracing recurs."""
    inside = float(f.get("loop_in_steps_us") or 0.0)
    return inside > 0 and inside >= float(f["tracing_pct"]) / 100 * float(f.get("step_us") or 0.0)


def _scope(name: str) -> str:
    """The name scope ``purposes.NAME_RULES`` matched in an op's name (``write_summary``)."""
    for pattern, _ in purposes.NAME_RULES:
        m = pattern.search(name)
        if m:
            return m.group(0).strip("/")
    return name


#: Timed steps a step-time trend needs (fewer: a few noisy medians, not a trend), and how much
#: it must add across the timed window (a loaded machine's drift gives a few percent).
TREND_STEPS = 50
TREND_WINDOW_PCT = 15
#: Blocks of a script's steps (``script.blocks``) a trend across the run needs, and the share
#: of pairs of points that must rise (noise gives ~0.5).
TREND_BLOCKS = 6
TREND_RISING = 0.8
#: ... and of the blocks' CPU time per step where it was read (a steady growth of the work
#: raises it too; contention from other processes does not).
TREND_CPU_RISING = 0.7


def _recurring_epoch_cost(f: Facts) -> float:
    """The epochs' boundary cost per step where it recurs (two boundaries or more, as
    ``per_epoch_cost`` needs); one boundary can be a one-off (2.2 s at the only boundary of a
    custom train_step's fit held back its per-batch finding)."""
    if (f.get("epoch_boundaries") or 0) < 2:
        return 0.0
    return float(f.get("epoch_cost_per_step_us") or 0.0)


#: The overhead share (everything but the kernels and communication) at which a step's
#: per-call cost gets a finding: the complement of ``compute_bound``'s 60% of kernels, so a
#: step is one or the other. At 50% a tf.function loop measured 48% overhead and got neither
#: ("no fix found"), while 8 steps per call measured 45% less per step without the profiler.
OVERHEAD_BOUND_PCT = 40
#: A graph growing by at least this many ops a step, and this many in all, is built in the loop.
GRAPH_OPS_PER_STEP = 0.1
GRAPH_OPS_GROWTH = 50
#: Traces after the warm-up that are a few new inputs, not retracing: at most this many, and
#: under this many a step (a tf.data loop's last partial batch traces once more per shape).
FEW_RETRACES = 3
FEW_RETRACES_PER_STEP = 0.01


#: The graph executor's per-op cost at least this share of a step's overhead, and this many
#: times the per-call cost beside it, is the overhead: several steps a call cannot touch it.
PER_OP_SHARE = 0.5
PER_OP_OVER_CALL = 2.0


def _per_op_bound(f: Facts) -> bool:
    """Whether a compiled step's overhead is its ops' scheduling inside the call (a Keras
    LSTM's 20 time steps of small ops: 11.0 ms of 14.2 ms of overhead, per call 1.0 ms;
    steps_per_execution=4 was 1.1-1.7x slower without the profiler) rather than the calls."""
    per_op, overhead = f.get("per_op_us"), f.get("overhead_us")
    if not per_op or not overhead:
        return False
    beside = (f.get("per_call_us") or 0.0) + (f.get("python_us") or 0.0)
    return per_op >= PER_OP_SHARE * overhead and per_op >= PER_OP_OVER_CALL * beside


def _overhead_bound(f: Facts) -> bool:
    # Tracing is not per-call overhead a larger batch would spread, nor is waiting for input:
    # their rules say what to do.
    # Nor is a TF1 graph extended in the loop (graph_growth): its new executors are the
    # overhead, and no larger batch spreads them.
    return (
        f["overhead_pct"] >= OVERHEAD_BOUND_PCT
        and f["units_per_step"] == 1
        and (f.get("tracing_pct") or 0) < 25
        and input_rules.not_input_bound(f)
        and not f.get("slow_by_graph")
    )


#: What both retrace findings say: the function, its retraces, why and the fix.
_RETRACE_NEEDS = ("label", "retrace_fn", "retraces", "steady_steps", "retrace_why", "retrace_fix")

RULES: tuple[Rule, ...] = (
    Rule(
        id="overhead_bound_measured",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "overhead_pct",
            "overhead_us",
            "compute_us",
            "flops",
            "whileloop_saving_us",
            "whileloop_variant_us",
        ),
        when=lambda f: f["overhead_pct"] >= OVERHEAD_BOUND_PCT,
        message="{label}: {overhead_pct:.0f}% of each {step_us:,.0f} µs step is overhead; the "
        "arithmetic ({flops:,} flops) takes {compute_us:,.1f} µs of kernels.",
        fix="Run many steps per call: the same loop inside one session.run (tf.while_loop) "
        "measured {whileloop_variant_us:,.1f} µs per step, {whileloop_saving_us:,.0f} µs less.",
        cost="overhead_us",
    ),
    Rule(
        id="overhead_bound",
        subject="workload",
        needs=("label", "step_us", "overhead_pct", "overhead_us", "compute_us", "flops"),
        when=lambda f: (
            _overhead_bound(f)
            and f.get("whileloop_saving_us") is None
            and f.get("function_step_saving_us") is None
            and f["framework"] in ("tf1", "tf2", "keras")
            and not f["eager"]
        ),
        message="{label}: {overhead_pct:.0f}% of each {step_us:,.0f} µs step is overhead; the "
        "arithmetic ({flops:,} flops) takes {compute_us:,.1f} µs of kernels.",
        fix="Do more work per framework call: larger batches, or the loop inside the graph "
        "(tf.while_loop, a tf.function running several steps, Keras steps_per_execution).",
        cost="overhead_us",
    ),
    Rule(
        id="overhead_bound_session",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "overhead_pct",
            "session_overhead_us",
            "session_overhead_note",
            "compute_us",
        ),
        when=lambda f: _overhead_bound(f) and f.get("flops") is None and f["framework"] == "tf1",
        message="{label}: {overhead_pct:.0f}% of each {step_us:,.0f} µs step is overhead around "
        "{compute_us:,.1f} µs of kernels{session_overhead_note}.",
        fix="Do more work per session.run: larger batches, or several steps inside the graph "
        "(a tf.while_loop over the update), so the per-call cost is paid once for many.",
        cost="session_overhead_us",
    ),
    Rule(
        id="overhead_bound_keras",
        subject="workload",
        needs=("label", "step_us", "overhead_pct", "overhead_us", "compute_us"),
        when=lambda f: (
            not f.get("check_numerics")
            and _overhead_bound(f)
            and f.get("flops") is None
            and f["framework"] == "keras"
            # A batch's own machinery, not an epoch's: steps_per_execution helps the former.
            and _recurring_epoch_cost(f) < 0.5 * f["overhead_us"]
            # An eager fit's overhead is its execution mode (eager_switch says which).
            and not f.get("eager_switch")
            # Epochs of one batch: the epoch's machinery, not the batch's (one_batch_epochs);
            # fit called on one batch again and again: its per-call set-up (fit_per_batch).
            and not f.get("one_batch_epochs")
            and not call_rules.fit_per_batch(f)
            # The ops' scheduling inside the call (per_op_bound).
            and not _per_op_bound(f)
            # Python making the batches beside the step, or the pipeline's threads, took the
            # cores: the step waits for them (python_batches, cpu_competition say which). A
            # PyDataset's per-sample augmentation beside a busy process read 52% "fit's
            # per-batch machinery" and led with steps_per_execution, which leaves the
            # __getitem__ calls as they are.
            and not input_rules.shares_cores(f)
            # A line of the script's inside the batch holds half that overhead (a callback
            # calling model.predict at every batch end, 97% of the step: step_line's).
            and not step_lines.holds(f, 0.5 * f["overhead_pct"])
        ),
        message="{label}: {overhead_pct:.0f}% of each {step_us:,.0f} µs batch is overhead around "
        "{compute_us:,.1f} µs of kernels: the rest is fit's per-batch machinery.",
        fix="Run several batches per call: model.compile(..., steps_per_execution=k), or a "
        "larger batch_size.",
        cost="overhead_us",
    ),
    Rule(
        id="per_op_bound",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "overhead_pct",
            "per_op_us",
            "compute_us",
            "per_call_us",
            "per_op_fix",
        ),
        when=lambda f: (
            _overhead_bound(f)
            and f["framework"] in ("keras", "tf2")
            and _per_op_bound(f)
            and not f.get("eager_switch")
            # The ops the debugging switch adds (check_numerics): XLA cannot compile them.
            and not f.get("check_numerics")
            # Not where the input pipeline's threads take the cores (cpu_competition): the ops
            # then wait for a core between kernels (a Keras LSTM fed by a timeseries dataset's
            # per-window map, a core's worth: cached, 2.8-3x faster without the profiler).
            and not input_rules.competes(f)
        ),
        message="{label}: {overhead_pct:.0f}% of each {step_us:,.0f} µs step is overhead around "
        "{compute_us:,.1f} µs of kernels, and {per_op_us:,.0f} µs of it is the graph "
        "executor's cost per op inside the call (many small ops run one by one: a recurrent "
        "layer's time steps, small layers), not the call's own ({per_call_us:,.0f} µs): more "
        "steps a call cannot remove it.",
        fix="{per_op_fix}",
        cost="per_op_us",
    ),
    Rule(
        id="one_batch_epochs",
        subject="workload",
        needs=("label", "step_us", "overhead_pct", "overhead_us", "one_batch_epochs"),
        when=lambda f: _overhead_bound(f) and f["framework"] == "keras",
        message="{label}: each of the {one_batch_epochs:,} epochs of fit is one batch, so fit's "
        "per-epoch work (the data iterator's set-up, the epoch's callbacks and logs) runs at "
        "every step: {overhead_pct:.0f}% of each {step_us:,.0f} µs step is not the model's "
        "arithmetic.",
        fix="Train more batches per epoch and fewer epochs (the data repeated within an epoch: "
        "a tf.data dataset with .repeat() and steps_per_epoch, or x and y tiled); "
        "steps_per_execution cannot help a one-batch epoch.",
        cost="overhead_us",
    ),
    Rule(
        id="overhead_bound_function",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "overhead_pct",
            "overhead_us",
            "compute_us",
            "function_fix",
            "function_overhead_us",
            "function_overhead_note",
        ),
        when=lambda f: (
            not f.get("check_numerics")
            and _overhead_bound(f)
            and f.get("flops") is None
            and f["framework"] == "tf2"
            and f["mode"] == "function"
            # The call's own cost, the script's Python and the input wait beside it left out,
            # still a step's worth of a finding.
            and f.get("function_overhead_us", f["overhead_us"])
            >= OVERHEAD_BOUND_PCT / 100 * f["step_us"]
            and not _per_op_bound(f)
        ),
        message="{label}: {overhead_pct:.0f}% of each {step_us:,.0f} µs step is overhead around "
        "{compute_us:,.1f} µs of kernels{function_overhead_note}.",
        fix="{function_fix}",
        cost="function_overhead_us",
    ),
    Rule(
        id="compute_bound_peak",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "compute_us",
            "compute_pct",
            "top_kernels",
            "compute_fix",
            "gflops",
            "peak_gflops",
            "peak_said",
            "step_flops",
        ),
        when=lambda f: (
            not f.get("check_numerics")
            and not f.get("tf_intra")
            and f["compute_pct"] >= 60
            and f.get("arithmetic_share", 1.0) >= 1 - OTHER_PURPOSE_SHARE
        ),
        message="{label} is compute-bound: kernels take {compute_us:,.0f} µs of each "
        "{step_us:,.0f} µs step ({compute_pct:.0f}%), {step_flops:,} flops at "
        "{gflops:,.1f} GFLOP/s, {peak_said}; the top kernels are {top_kernels}.",
        fix="{compute_fix}",
        cost="compute_us",
    ),
    Rule(
        id="compute_bound",
        subject="workload",
        needs=("label", "step_us", "compute_us", "compute_pct", "top_kernels", "compute_fix"),
        # Compute-bound means the model's arithmetic: kernels mostly for something else
        # (summaries, checkpoints, input) are that finding instead.
        when=lambda f: (
            f["compute_pct"] >= 60
            and f.get("gflops") is None
            and f.get("arithmetic_share", 1.0) >= 1 - OTHER_PURPOSE_SHARE
            # Kernels slowed by input work on the same cores (a generator's augmentation fed
            # to fit: "compute-bound, 20 ms of a 26 ms step" where the whole step without it
            # took 8.4 ms without the profiler): the input's finding says what to change.
            and not input_rules.shares_cores(f)
            # Kernels held to fewer threads than the cores: tf_threads_limited's.
            and not f.get("tf_intra")
            and not f.get("check_numerics")
        ),
        message="{label} is compute-bound: kernels take {compute_us:,.0f} µs of each "
        "{step_us:,.0f} µs step ({compute_pct:.0f}%); the top kernels are {top_kernels}.",
        fix="{compute_fix}",
        cost="compute_us",
    ),
    Rule(
        id="check_numerics",
        subject="workload",
        needs=("label", "step_us", "overhead_us", "overhead_pct", "numerics_us", "numerics_what"),
        when=lambda f: bool(f.get("check_numerics")),
        message="{label} runs with tf.debugging.enable_check_numerics() on: every op's float "
        "output is checked for NaN and infinity, one more op and a check per op; {numerics_what} "
        "of each {step_us:,.0f} µs step.",
        fix="Remove tf.debugging.enable_check_numerics() once the NaN it was for is found (a "
        "debugging switch), or call tf.debugging.disable_check_numerics() before training.",
        cost="numerics_us",
    ),
    Rule(
        id="tf_threads_limited",
        subject="workload",
        needs=("label", "step_us", "compute_us", "tf_intra", "tf_cores", "tf_threads_us"),
        when=lambda f: f["compute_us"] >= 0.4 * f["step_us"],
        message="{label} holds TensorFlow's kernels to fewer threads than this machine's "
        "{tf_cores} cores (tf.config.threading.set_intra_op_parallelism_threads({tf_intra})): "
        "its {compute_us:,.0f} µs of kernels in each {step_us:,.0f} µs step use {tf_intra} "
        "of them.",
        fix="Let TensorFlow use the cores: remove set_intra_op_parallelism_threads({tf_intra}) "
        "(and set_inter_op_parallelism_threads), or set it to {tf_cores}. Spread over the "
        "cores, the kernels would take at best {tf_threads_us:,.0f} µs less a step (predicted, "
        "not measured: the pools are fixed once TensorFlow starts).",
        cost="tf_threads_us",
    ),
    Rule(
        id="eager_switch",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "eager_switch",
            "eager_fix",
            "python_dispatch_pct",
            "python_dispatch_us",
        ),
        when=lambda f: True,
        message="{label} runs eagerly because of {eager_switch}: every op of each step is "
        "dispatched from Python, one by one ({python_dispatch_pct:.0f}% of the {step_us:,.0f} "
        "µs step in Python and dispatch).",
        fix="Run it as a graph: {eager_fix}; the step's ops then run in one call.",
        cost="python_dispatch_us",
    ),
    Rule(
        id="periodic_slow_steps",
        subject="workload",
        needs=(
            "label",
            "slow_count",
            "slow_us",
            "slow_factor",
            "slow_excess_pct",
            "slow_excess_us",
            "slow_period",
            "slow_what",
            "slow_fix",
            "step_us",
        ),
        # Not where the slow steps are those that run a TF1 graph's new op (graph_growth), nor
        # where their line is a looped Keras call (predict_in_loop's).
        when=lambda f: (
            f["slow_period"] > 1
            and f["slow_excess_pct"] >= PERIODIC_MIN_PCT
            and not f.get("slow_by_graph")
            and not f.get("slow_by_call")
            and not f.get("slow_by_recreated")
            and not call_rules.new_models(f)
            # A fit's epoch boundary (a workload's, whose fit the script record does not
            # describe): per_epoch_cost says what runs there (keras_adam's 130-batch epochs
            # were named twice, once as "something runs every 130 steps").
            and f["slow_period"] != f.get("steps_per_epoch")
            # Nor where the boundaries' cost is below per_epoch_cost's threshold as timed
            # outside the windows (the audio tutorial's 6-batch epochs: "one step in every 6
            # is 3.0x a normal step ... 50% of the loop's time" from steps the phases and a
            # busy machine slowed; 8% of the loop without the profiler).
            and f["slow_period"] != f.get("fit_steps_per_epoch")
        ),
        message="{label}: one step in every {slow_period} is {slow_factor:.1f}× a normal step "
        "({slow_us:,.0f} µs against {step_us:,.0f} µs; {slow_count} of them in the measured "
        "windows): they hold {slow_excess_pct:.0f}% of the loop's time beyond a normal step's.",
        fix="{slow_what}: {slow_fix}.",
        cost="slow_excess_us",
    ),
    Rule(
        id="slow_steps_update",
        subject="workload",
        needs=(
            "label",
            "slow_count",
            "slow_excess_pct",
            "update_what",
            "update_fix",
            "update_us",
            "update_apart",
        ),
        # Where the periodic finding does not say it: at no period, or where a timed line of
        # the slow steps names them (a DQN's target predict every 4 frames, its update in the
        # same steps, 47% of its loop without the profiler, went unnamed).
        # Nor where the slow steps are new models' first batches (model_per_fit: a loop
        # building a model per trial read "the slow steps run the model's training update:
        # make it cheaper, not rarer").
        when=lambda f: bool(f["update_apart"]) and not call_rules.new_models(f),
        message="{label}: {slow_count} steps over 3× the median hold {slow_excess_pct:.0f}% of "
        "the loop's time beyond a normal step's.",
        fix="{update_what}: {update_fix}.",
        cost="update_us",
    ),
    Rule(
        id="function_recreated",
        subject="workload",
        needs=(
            "label",
            "recreated_fn",
            "recreated_n",
            "recreated_calls",
            "recreated_cost",
            "recreated_cost_us",
        ),
        when=lambda f: True,
        message="{label}: the tf.function `{recreated_fn}` was made anew {recreated_n} times, "
        "{recreated_calls} calls each, and each new one is traced at its first call: "
        "{recreated_cost}.",
        fix="Define `{recreated_fn}` once, before the loop: @tf.function makes a new function "
        "where its def runs, so a def inside the loop makes one, traced again, at every "
        "iteration.",
        cost="recreated_cost_us",
    ),
    Rule(
        id="kernels_not_arithmetic",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "compute_pct",
            "purpose",
            "purpose_share_pct",
            "purpose_us",
            "purpose_step_pct",
            "purpose_kernels",
            "purpose_fix",
        ),
        when=lambda f: (
            f["purpose_share_pct"] >= 100 * OTHER_PURPOSE_SHARE
            and f["purpose_step_pct"] >= 20
            and bool(f["purpose_fix"])
            # An input-bound step's input kernels are input_bound's to name, with its own fix
            # (a Sequence's PyFunc, 20% of the step: the same batches, said twice); a
            # py_function the step's own graph calls is py_function_in_step's.
            and not (
                f["purpose"] == purposes.INPUT
                and (
                    (f.get("input_pct") or 0.0) >= input_rules.INPUT_BOUND_PCT
                    or py_rules.python_in_step(f)
                )
            )
        ),
        message="{label}: {purpose_step_pct:.0f}% of each {step_us:,.0f} µs step is kernels "
        "for {purpose}, not the model's arithmetic ({purpose_us:,.0f} µs: {purpose_kernels}; "
        "{purpose_share_pct:.0f}% of the kernel time).",
        fix="Do it less often, or elsewhere: {purpose_fix}.",
        cost="purpose_us",
    ),
    Rule(
        id="per_epoch_cost",
        subject="workload",
        needs=(
            "label",
            "epoch_excess_us",
            "epoch_share_pct",
            "steps_per_epoch",
            "epoch_boundaries",
            "epoch_work",
            "epoch_fix",
            "epoch_cost_per_step_us",
            "epoch_unit",
            "epoch_what",
            "step_us",
        ),
        # One boundary cannot tell a recurring cost from a one-off (the first validation
        # traces its function): 25% from one boundary where the recurring cost was 8%.
        # And the smallest boundary's share too: a threshold held to the lower bound (the
        # few-long-steps CNN's validation, 8% measured without the profiler, read 11% from the
        # median of 3 boundaries).
        when=lambda f: (
            f["epoch_share_pct"] >= 10
            and f.get("epoch_low_pct", 100.0) >= 10
            and (
                f["epoch_boundaries"] >= 2
                or bool(f.get("epoch_one_outside"))
                or bool(f.get("epoch_one_timed"))
            )
        ),
        message="{label}: {epoch_what}; a batch is {step_us:,.0f} µs: {epoch_work} at each "
        "of the {steps_per_epoch}-batch {epoch_unit}s costs {epoch_share_pct:.0f}% of the "
        "training time.",
        fix="{epoch_fix}.",
        cost="epoch_cost_per_step_us",
    ),
    Rule(
        id="feed_dict_cost_measured",
        subject="workload",
        needs=("label", "feed_us", "feed_pct", "cast_us", "nofeed_saving_us"),
        when=lambda f: f["feed_pct"] >= 10,
        message="{label}: feed_dict costs {feed_us:,.0f} µs per step ({feed_pct:.0f}% of the "
        "step) in Python; converting the fed arrays' dtype is {cast_us:,.1f} µs of it.",
        fix="Keep the data in the graph (constants, a variable, or tf.data): measured "
        "{nofeed_saving_us:,.0f} µs less per step, more than the Python-side feed cost alone.",
        cost="feed_us",
    ),
    Rule(
        id="feed_dict_same_arrays",
        subject="workload",
        needs=("label", "feed_us", "feed_pct", "same_feeds"),
        when=lambda f: (
            f["feed_pct"] >= 10 and f["same_feeds"] and f.get("nofeed_saving_us") is None
        ),
        message="{label}: feed_dict costs {feed_us:,.0f} µs per step ({feed_pct:.0f}% of the "
        "step) in Python, feeding the same arrays every step.",
        fix="Keep the data in the graph (constants or a variable) instead of feeding the same "
        "arrays every step.",
        cost="feed_us",
    ),
    Rule(
        id="feed_dict_batches",
        subject="workload",
        needs=("label", "feed_us", "feed_pct"),
        when=lambda f: (
            f["feed_pct"] >= 10
            and f.get("same_feeds") is False
            and f.get("nofeed_saving_us") is None
        ),
        message="{label}: feed_dict costs {feed_us:,.0f} µs per step ({feed_pct:.0f}% of the "
        "step) in Python to hand each batch to the session.",
        fix="Feed the batches through an input pipeline inside the graph (tf.data with "
        "prefetch) instead of feed_dict, or feed fewer, larger batches.",
        cost="feed_us",
    ),
    Rule(
        id="feed_cast",
        subject="workload",
        needs=("label", "cast_us", "step_us"),
        when=lambda f: (
            f["cast_us"] >= max(2.0, 0.02 * f["step_us"]) and f.get("f32feed_saving_us") is None
        ),
        message="{label}: converting the fed arrays to the placeholders' float32 costs "
        "{cast_us:,.1f} µs per step (a copy of every fed array).",
        fix="Feed float32 arrays (cast them once, before the loop).",
        cost="cast_us",
    ),
    Rule(
        id="loss_fetch_measured",
        subject="workload",
        needs=("label", "fetch_value_us", "fetch_value_pct", "trainonly_saving_us"),
        when=lambda f: f["fetch_value_pct"] >= 3,
        message="{label}: fetching the loss every step costs {fetch_value_us:,.0f} µs "
        "({fetch_value_pct:.0f}% of the step) in fetch handling.",
        fix="Fetch the loss every N steps: fetching only the train op measured "
        "{trainonly_saving_us:,.0f} µs less per step.",
        cost="fetch_value_us",
    ),
    Rule(
        id="eager_dispatch_measured",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "python_us",
            "dispatch_us",
            "compute_us",
            "python_dispatch_us",
            "python_dispatch_pct",
            "function_step_saving_us",
            "function_step_speedup",
        ),
        when=lambda f: (
            f["eager"]
            and f["python_dispatch_pct"] >= EAGER_OVERHEAD_PCT
            and not f.get("eager_switch")
        ),
        message="{label}: eager execution spends {python_us:,.0f} µs per step in Python and "
        "{dispatch_us:,.0f} µs dispatching ops one by one, for {compute_us:,.0f} µs of kernels.",
        fix="Wrap the step in tf.function: measured {function_step_saving_us:,.0f} µs less per "
        "step ({function_step_speedup:.1f}× faster).",
        cost="python_dispatch_us",
    ),
    Rule(
        id="eager_dispatch",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "python_us",
            "dispatch_us",
            "python_dispatch_us",
            "python_dispatch_pct",
            "step_function",
            "eager_saving_us",
            "eager_saving_how",
        ),
        when=lambda f: (
            f["eager"]
            and f["python_dispatch_pct"] >= EAGER_OVERHEAD_PCT
            and f.get("function_step_saving_us") is None
            and not f.get("eager_switch")
        ),
        message="{label}: eager execution spends {python_us:,.0f} µs per step in Python and "
        "{dispatch_us:,.0f} µs dispatching ops one by one ({python_dispatch_pct:.0f}% of the "
        "{step_us:,.0f} µs step).",
        fix="Wrap {step_function} in tf.function (the @tf.function decorator): its ops then "
        "run as one graph call, without the per-op Python and dispatch: about "
        "{eager_saving_us:,.0f} µs less per step{eager_saving_how}, less the call's own cost "
        "(a few hundred µs), and often more, as the graph also runs the kernels with fused ops "
        "and fewer copies (TF's TensorBoard guide's eager train_step, its Python and dispatch "
        "59% of the step: 13.5x faster in tf.function, without the profiler).",
        cost="eager_saving_us",
    ),
    Rule(
        id="numpy_fixed_cost",
        subject="workload",
        needs=("label", "n", "a_us", "b_ns", "fixed_pct", "n_even"),
        when=lambda f: f["framework"] == "numpy" and f["fixed_pct"] >= 50,
        message="{label}: at n = {n:,} a step is {fixed_pct:.0f}% fixed per-call cost (the size "
        "sweep fits {a_us:,.1f} µs + {b_ns:.2f} ns per sample).",
        fix="The arithmetic only outweighs the per-call cost above n ≈ {n_even:,.0f}: process "
        "more samples per numpy call (vectorise across steps or batch more data).",
        cost="a_us",
    ),
    Rule(
        id="retracing",
        subject="workload",
        needs=(*_RETRACE_NEEDS, "retraces_per_step", "retrace_arg", "tracing_us", "tracing_pct"),
        when=lambda f: f["tracing_pct"] >= 1,
        message="{label}: tf.function {retrace_fn} retraced {retraces} times in "
        "{steady_steps} steady-state steps ({retraces_per_step:.2f} a step); tracing and "
        "instantiating its new concrete functions cost {tracing_us:,.0f} µs a step "
        "({tracing_pct:.0f}% of the step): {retrace_why}.",
        fix="{retrace_fix}",
        cost="tracing_us",
    ),
    Rule(
        id="costly_retraces",
        subject="workload",
        needs=(
            *_RETRACE_NEEDS,
            "retrace_each_s",
            "retrace_cost_s",
            "retrace_cost_pct",
            "retrace_loop_s",
            "retrace_cost_us",
        ),
        # The retraces fell outside the sampled steps (retracing reads their share there).
        when=lambda f: (f.get("tracing_pct") or 0.0) < 1 and f["retrace_cost_pct"] >= 10,
        message="{label}: tf.function {retrace_fn} retraced {retraces} times in "
        "{steady_steps} steady-state steps: {retrace_why}. Its first call (its first trace) "
        "took {retrace_each_s:,.1f} s beyond a step, so its retraces cost about "
        "{retrace_cost_s:,.0f} s, {retrace_cost_pct:.0f}% of the loop's {retrace_loop_s:,.0f} s "
        "(none fell in the sampled steps).",
        fix="{retrace_fix}",
        cost="retrace_cost_us",
    ),
    Rule(
        id="graph_growth",
        subject="workload",
        needs=(
            "label",
            "ops_per_step",
            "ops_from",
            "ops_to",
            "graph_cost_us",
            "graph_cost",
            "graph_slow",
            "graph_ops_where",
            "graph_rate",
            "graph_fix",
        ),
        # A steady growth, not a few ops made once mid-run: a loop of two session.run calls
        # an iteration, one making an op, grows 0.5 a step, and 988 ops over 1,976 steps read
        # 0.499 on one run (at a 0.5 floor, no finding).
        when=lambda f: (
            f["ops_per_step"] >= GRAPH_OPS_PER_STEP
            and f["ops_to"] - f["ops_from"] >= GRAPH_OPS_GROWTH
        ),
        message="{label}: the session's graph grows by {graph_rate} "
        "({ops_from:,} to {ops_to:,} ops): the loop creates ops {graph_ops_where}, so each "
        "session.run that runs them extends the graph and sets up a new executor: "
        "{graph_cost}{graph_slow}.",
        fix="{graph_fix}",
        cost="graph_cost_us",
    ),
    Rule(
        id="steps_slow_down",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "trend_us_per_100",
            "trend_pct_per_100",
            "trend_window_pct",
            "trend_where",
            "trend_rising",
            "trend_low_us_per_100",
            "trend_high_us_per_100",
        ),
        when=lambda f: (
            f["trend_window_pct"] >= TREND_WINDOW_PCT
            and f["trend_rising"] >= TREND_RISING
            and f["trend_low_us_per_100"] > 0
            and f.get("trend_cpu_rising", 1.0) >= TREND_CPU_RISING
            and not f.get("trend_refuted")
            and f.get("shift_step") is None
        ),
        message="{label}: steps get slower as the run goes on: +{trend_us_per_100:,.1f} µs "
        "every 100 steps (95%: +{trend_low_us_per_100:,.1f} to +{trend_high_us_per_100:,.1f}; "
        "{trend_pct_per_100:.1f}% of the {step_us:,.0f} µs step), {trend_where}.",
        fix="Something grows with every step: ops added to a graph, tensors or Python objects "
        "kept in a list, a metric's history, an unbounded cache; keep the loop's state "
        "constant-sized (a tf.Variable updated in place, values converted with float()).",
        cost="trend_us_per_100",
    ),
    Rule(
        id="steps_change_level",
        subject="workload",
        needs=(
            "label",
            "shift_step",
            "shift_where",
            "shift_before_us",
            "shift_after_us",
            "shift_ratio",
            "shift_timed_words",
            "trend_where",
        ),
        when=lambda f: f.get("shift_fit") is None,
        message="{label}: {shift_where}, steps take {shift_after_us:,.0f} µs, "
        "{shift_ratio:.1f}× the {shift_before_us:,.0f} µs before, and stay there (the "
        "medians of blocks of steps {trend_where}): the loop does more work a step from then "
        "on; nothing grows step by step.",
        fix="Nothing to bound: look at what the loop starts doing at iteration {shift_step:,} "
        "(training that begins once a replay memory fills, a schedule, longer sequences or "
        "larger batches){shift_timed_words}.",
        cost="",
    ),
    Rule(
        id="later_fit_slower",
        subject="workload",
        needs=(*LATER_FIT_NEEDS, "shift_warmup", "shift_fit_pct", "shift_fit_lead"),
        when=lambda f: True,
        message=LATER_FIT_MESSAGE,
        fix="Measure that fit's steps: python -m profiler run {label} --warmup {shift_warmup} "
        "(the phases then run after the earlier fits' steps).",
        cost="",
        share="shift_fit_pct",
        lead="{shift_fit_lead}",
    ),
    Rule(
        id="later_fit_measured",
        subject="workload",
        needs=LATER_FIT_NEEDS,
        when=lambda f: f.get("shift_warmup") is None,
        message=LATER_FIT_MESSAGE,
        fix="Nothing to change for the jump itself: it is another model's training, not a "
        "change in the loop; the findings above describe that fit's steps.",
        cost="",
    ),
    Rule(
        id="library_tracing",
        subject="workload",
        needs=("label", "tracing_us", "tracing_pct", "library_where"),
        when=lambda f: (
            f["tracing_pct"] >= 1
            and _tracing_shown(f)
            and f.get("retrace_fn") is None
            and f.get("ops_per_step") is None
        ),
        message="{label}: {tracing_us:,.0f} µs per steady-state step ({tracing_pct:.1f}%) goes to "
        "tracing in {library_where}.",
        fix="Its signature is not the script's to change: find the call in the loop that gives "
        "it new input shapes or new Python objects each time (a last partial batch, a new "
        "model, optimizer or dataset built in the loop) and keep them the same.",
        cost="tracing_us",
    ),
    Rule(
        id="graph_constants",
        subject="workload",
        needs=(
            "label",
            "const_mb",
            "const_largest",
            "first_excess_s",
            "first_excess_pct",
            "script_wall_s",
            "const_cost_us",
        ),
        when=lambda f: True,
        message="{label}: the graph holds {const_mb:,.0f} MB of constants (the largest "
        "{const_largest}): arrays made into graph constants (Dataset.from_tensor_slices or "
        "tf.constant on numpy arrays) are copied into the session at its first run and again "
        "by the op that first reads them; the first steps took {first_excess_s:,.1f} s beyond "
        "steady ones, {first_excess_pct:.0f}% of the script's {script_wall_s:,.1f} s.",
        fix="Feed the arrays through placeholders: Dataset.from_tensor_slices((x_ph, y_ph)) with "
        "the arrays in the feed_dict of the iterator's initializer (a tf.Variable initialised "
        "from a placeholder for a constant the steps read), so the graph holds no copy of the "
        "data.",
        cost="const_cost_us",
        share="first_excess_pct",
        lead="the first steps' copy of the graph's {const_mb:,.0f} MB of constants took "
        "{first_excess_pct:.0f}% of the script's {script_wall_s:,.1f} s",
    ),
    Rule(
        id="one_off_tracing",
        subject="workload",
        needs=("label", "tracing_pct", "one_off_tracing", "one_off_what"),
        when=lambda f: (
            f["tracing_pct"] >= 1
            and not f.get("tracing_in_predict")
            # A line of the script holding more of the step than the tracing runs it every
            # step (a callback's evaluate every batch builds its dataset's functions anew).
            and not step_lines.holds(f, f["tracing_pct"])
            # Nor under predict or evaluate called inside the steps: each call builds its
            # dataset's functions anew (a GAN's predict between its train_on_batch steps).
            and not _tracing_in_calls(f)
            # Nor where the script makes its tf.function anew (function_recreated).
            and not f.get("recreated_fn")
            # Nor where a new model for each fit traces its train function each time, at a
            # cost model_per_fit names.
            and not call_rules.new_models(f)
        ),
        message="{label}: {tracing_pct:.1f}% of the sampled step time was tracing, yet "
        "{one_off_what}.",
        fix="Nothing to change in the loop: a trace is paid once, not by every step; it weighs "
        "this much only in the few steps this run measured.",
    ),
    Rule(
        id="steady_tracing",
        subject="workload",
        needs=("label", "tracing_us", "tracing_pct"),
        when=lambda f: (
            f["tracing_pct"] >= 1
            and _tracing_shown(f)
            and not f.get("one_off_tracing")
            and f["uses_function"]
            and f.get("retrace_fn") is None
            and f.get("library_where") is None
            and f.get("ops_per_step") is None
        ),
        message="{label}: {tracing_us:,.0f} µs per steady-state step ({tracing_pct:.1f}%) goes to "
        "tracing or retracing.",
        fix="Give tf.function a stable input signature (same shapes and dtypes, tensors not "
        "Python numbers) so it traces once.",
        cost="tracing_us",
    ),
    *input_rules.RULES,
    *call_rules.RULES,
    *eager_call_rules.RULES,
    *step_lines.RULES,
    *py_rules.RULES,
    *loop_rules.RULES,
    *convert_rules.RULES,
    *memory_rules.RULES,
    *gc_rules.RULES,
    *long_rules.RULES,
    *waiting_rules.RULES,
    *start_rules.RULES,
)


#: The what-if that measures a finding's fix on the user's loop (``profiler.capture.whatifs``).
WHATIF_FOR: dict[str, tuple[str, ...]] = {
    "overhead_bound_session": ("tf1_callable",),
    "feed_dict_same_arrays": ("tf1_feeds_once", "tf1_callable"),
    # Not feed_dict_batches: its fix is a tf.data pipeline, which still pays session.run each
    # step; the callable removes the call's whole Python side (CS20's linear regression: "feed
    # through tf.data ... Measured on your loop, with the step's session.run replaced by a
    # native callable: 134 µs less", where tf.data saved ~65 µs without the profiler).
    "retracing": ("tensor_args", "reduce_retracing"),
    "steady_tracing": ("tensor_args", "reduce_retracing"),
    # Not function_jit for overhead_bound_function: XLA fuses the ops inside the call, the
    # fix is fewer calls (a custom loop's overhead-bound step read "Run several steps per
    # tf.function call ... Measured on your loop, with train_step compiled with XLA: 286 µs
    # less" and XLA led the verdict at 1.3x, where several steps a call were 2.2x faster
    # without the profiler).
    "overhead_bound_keras": ("keras_steps_4", "keras_steps_16"),
    "compute_bound": ("keras_jit", "function_jit", "numpy_float32"),
    "compute_bound_peak": ("keras_jit", "function_jit", "numpy_float32"),
    "eager_dispatch": ("eager_function",),
    "eager_switch": ("functions_graph",),
    "per_op_bound": ("keras_jit", "function_jit"),
    "predict_in_loop": ("predict_direct",),
}


#: Rules whose advice its what-ifs test only in part: a compute-bound step's fix is less
#: arithmetic or faster kernels, XLA or float32 among several ways to try; XLA measured slower
#: (a VAE's fit: 114 -> 169 ms) leaves the rest, and the fix says what was measured after it
#: (it read "fix: Not the advice here: ... XLA ... slower").
PARTLY_MEASURED = frozenset({"compute_bound", "compute_bound_peak"})


def diagnose(
    workloads: Sequence[Any], experiments: Mapping[str, Any] | None, job: Any = None
) -> list[Diagnosis]:
    """Every rule that fires on every workload (``WorkloadAnalysis``) of the run, and on the
    job its workers make (``profiler.diagnoses.job``); a fix that a what-if measured on the
    workload's own loop quotes what it measured."""
    from profiler.diagnoses import job as job_rules

    all_facts = [f for w in workloads if (f := guarded(w.name, facts, w, experiments)) is not None]
    found = evaluate(RULES, "workload", all_facts)
    # A workload with no time split (a script that ran out of memory) still gets its growth.
    unattributed = guarded("the run", memory_rules.unattributed_facts, workloads) or []
    if unattributed:
        found += evaluate(memory_rules.RULES, "workload", unattributed)
    measured = {w.name: {m.id: m for m in getattr(w, "whatifs", ())} for w in workloads}
    refused = {w.name: _xla_refused(w) for w in workloads}
    kinds = {f["name"]: f.get("mem_cause_kind") or "" for f in all_facts + unattributed}
    facts_by = {f["name"]: f for f in all_facts}
    out = []
    for d in found:
        if d.rule == "memory_growth":
            out.append(_growth_measured(d, measured.get(d.name, {}), kinds.get(d.name, "")))
            continue
        out.append(
            _measured_fix(
                d,
                measured.get(d.name, {}),
                facts_by.get(d.name, {}),
                refused.get(d.name, ""),
            )
        )
    out += guarded("the job", job_rules.diagnose, job) or []
    # A finding whose advice the loop refuted still says where the time goes, after the rest.
    return sorted(ranked(out), key=lambda d: d.refuted)


def _measured_fix(
    d: Diagnosis, measured: Mapping[str, Any], f: Mapping[str, Any], refused: str
) -> Diagnosis:
    """``d`` with what the what-ifs measured on its workload's loop (``measured``, by id)."""
    ms = [
        m
        for key in WHATIF_FOR.get(d.rule, ())
        if (m := measured.get(key)) is not None
        and m.measured_us is not None
        and m.verdict != "failed"
    ]
    d = _xla_failed(d, measured, refused)
    if d.rule == "overhead_bound_keras" and f.get("batch_callbacks_note"):
        d = dataclasses.replace(d, fix=d.fix + f["batch_callbacks_note"])
    faster = _faster_than_kernels(d, f, measured)
    if faster is not None:
        return dataclasses.replace(d, fix=faster, refuted=True)
    if ms and all(refutes(m) for m in ms) and d.rule not in PARTLY_MEASURED:
        # Measured on this loop and no help: the advice goes, and the fix says so.
        said = " ".join(measured_sentence(m) for m in ms)
        return dataclasses.replace(d, fix=f"Not the advice here: {said}", refuted=True)
    if any(
        m.id in XLA_WHATIFS and (m.verdict == "slower" or (not m.saves and m.measured_us < 0))
        for m in ms
    ):
        # ... and so is XLA whose blocks leaned slower, inconclusive (the Keras VAE's: 144.65
        # ms as written, 459.74 with it, 3 pairs; 1.8x slower without the profiler): it was
        # timed, and "time it" read as advice.
        # XLA measured slower on this loop is no longer among the things to time (the style
        # transfer tutorial's fix still said "XLA ... try it" after "measured: slower").
        # The step compiling with XLA already: the what-if ran it without, and the clause to
        # time that goes where XLA off measured slower.
        clause = xla_on_clause(f["xla_on"]) if f.get("xla_on") else ""
        d = dataclasses.replace(
            d,
            fix=d.fix.replace(XLA_CLAUSE, "").replace(XLA_CLAUSE_TF1, "").replace(clause, "")
            if clause
            else d.fix.replace(XLA_CLAUSE, "").replace(XLA_CLAUSE_TF1, ""),
        )
    for m in ms:
        d = dataclasses.replace(d, fix=f"{d.fix} {measured_sentence(m)}")
    return d


#: The what-ifs that compile the loop with XLA, whose failure takes XLA out of a fix.
XLA_WHATIFS = ("keras_jit", "function_jit")


#: The start of the reason a Keras XLA what-if did not run where Keras refuses XLA for the
#: model (``profiler.capture.whatifs._jit_refused``).
XLA_REFUSED = "Keras does not compile this model with XLA"


def _xla_refused(w: Any) -> str:
    """Why Keras would not compile the workload's model with XLA ("" where it would, or the
    what-ifs did not look): the what-if phase's reason for not running it."""
    trace = getattr(getattr(w, "outcome", None), "trace", None)
    rec = trace.phase("whatif") if trace is not None else None
    data = getattr(rec, "data", None)
    for key, why in getattr(data, "not_run", ()) or ():
        if key in XLA_WHATIFS and str(why).startswith(XLA_REFUSED):
            return str(why)
    return ""


def _xla_failed(d: Diagnosis, measured: Mapping[str, Any], refused: str = "") -> Diagnosis:
    """A fix that names XLA, where the loop compiled with XLA raised, or Keras refuses XLA
    for the model: the fix says so, with the error (a loop whose ops XLA cannot compile was
    still told to try jit_compile=True)."""
    if "XLA" not in d.fix or d.rule not in WHATIF_FOR:
        return d
    if refused:
        return dataclasses.replace(d, fix=f"{d.fix} {refused}: not a way here.")
    for key in XLA_WHATIFS:
        m = measured.get(key)
        if key in WHATIF_FOR[d.rule] and m is not None and m.status == "failed":
            why = m.error.rstrip(".") if m.error else "it raised"
            return dataclasses.replace(
                d, fix=f"{d.fix} XLA was tried on your loop and failed ({why}): not a way here."
            )
    return d


def _faster_than_kernels(
    d: Diagnosis, f: Mapping[str, Any], measured: Mapping[str, Any]
) -> str | None:
    """The fix of a compute-bound finding that a what-if contradicts: with the fix the whole
    step measured less than the kernels the framework phase read, so those are inflated on this
    loop (its trace's cost on small ops) and there was overhead to remove; None otherwise. A
    text classifier's embedding step read "compute 73%, little overhead to remove" (3.6 ms of
    kernels), while fit with 16 batches a call ran 2.7 ms a step: 1.4 ms a batch was saved
    without the profiler."""
    compute = f.get("compute_us")
    if d.rule not in ("compute_bound", "compute_bound_peak") or not compute:
        return None
    step = f.get("step_us")
    share = compute / step if step else None

    def kernels_beside(m: Any) -> float:
        """The kernels' time at the what-if blocks' own speed: their share of the step
        applied to the blocks as written beside the variant's (the timed and framework windows
        ran at other moments: beside a busy process a 1D-convnet's what-if blocks at 71 ms
        against 118 ms of kernels traced in a slower window read "inflated ... overhead to
        remove" for a step 95% kernels)."""
        if share is not None and m.baseline_us:
            return float(share * m.baseline_us)
        return float(compute)

    below = [
        m
        for m in measured.values()
        if m.saves
        and m.variant_us is not None
        and m.variant_us < KERNELS_REFUTED * kernels_beside(m)
    ]
    if not below:
        # A fix that leaves the kernels as they are (more batches a call, a native callable)
        # saved a share of the step: there was overhead to remove (a recommender's embedding
        # step beside a busy process read "little overhead to remove ... mixed_bfloat16" beside
        # steps_per_execution=16 measured 1.5x faster; 1.6x without the profiler, bfloat16 no
        # gain).
        overhead = [
            m
            for key, m in measured.items()
            if key not in KERNEL_WHATIFS
            and m.saves
            and m.measured_us is not None
            and m.baseline_us
            and m.measured_us >= OVERHEAD_REFUTED * m.baseline_us
        ]
        if not overhead:
            return None
        m = max(overhead, key=lambda m: m.measured_us / m.baseline_us)
        return (
            f"Not the advice here: {m.title}, which leaves the kernels as they are, measured "
            f"{100 * m.measured_us / m.baseline_us:.0f}% of the step less: the step had overhead "
            f"to remove. {measured_sentence(m)}"
        )
    m = min(below, key=lambda m: m.variant_us / kernels_beside(m))
    if share is not None and m.baseline_us:
        than = (
            f"{100 * m.variant_us / m.baseline_us:.0f}% of the step as written beside it "
            f"({m.baseline_us:,.0f} µs), less than the {100 * share:.0f}% of the step the "
            f"framework phase read as kernels ({compute:,.0f} µs)"
        )
    else:
        than = f"less than the {compute:,.0f} µs of kernels the framework phase read"
    return (
        f"Not the advice here: with {m.title} the whole step measured {m.variant_us:,.0f} µs, "
        f"{than}, so those are inflated on this loop (its trace's cost on many small ops) and "
        f"the step had overhead to remove. {measured_sentence(m)}"
    )


#: A what-if's step below this share of the kernels read refutes them (noise and the blocks'
#: medians leave a margin).
KERNELS_REFUTED = 0.85
#: The what-ifs that change the kernels themselves (XLA's fusion, float32 arithmetic) ...
KERNEL_WHATIFS = frozenset({"keras_jit", "function_jit", "numpy_float32", "numpy_blas_one_thread"})
#: ... and the share of the step one of the others must save to show overhead to remove.
OVERHEAD_REFUTED = 0.2


def _growth_measured(d: Diagnosis, measured: Mapping[str, Any], kind: str) -> Diagnosis:
    """The growth finding with what the what-ifs applying its cause's fix measured of the
    growth (``memory_rules.growth_sentence``)."""
    said = [
        s
        for key in memory_rules.WHATIF_FOR_CAUSE.get(kind, ())
        if (m := measured.get(key)) is not None and (s := memory_rules.growth_sentence(m))
    ]
    return dataclasses.replace(d, fix=" ".join([d.fix, *said]).strip()) if said else d


def refutes(m: Any) -> bool:
    """Whether a what-if's measurement is evidence against its fix: measured slower, or an
    interval that reaches zero and rules out half the predicted saving (or any, where nothing
    was predicted). An interval too wide to rule the prediction out is no evidence either way
    (a short fit's 2 pairs: -1.65 to +2.31 ms on a 2.5 ms batch, 0.9 ms predicted)."""
    if m.saves:
        return False
    if m.verdict == "slower":
        return True
    iv = m.interval_us
    if iv is None:
        return False  # one pair: no interval, nothing ruled out
    if m.predicted_us is None or m.predicted_us <= 0:
        # Nothing predicted: evidence against only where the interval rules out a tenth of the
        # step (a GAN's predict -> model(x) what-if, 3 pairs beside a busy process: -93 to +147
        # ms on a 372 ms step read "Not the advice here ... no measurable change").
        base = float(getattr(m, "baseline_us", 0.0) or 0.0)
        return bool(not base or iv[1] < UNRULED_STEP_SHARE * base)
    return bool(iv[1] < m.predicted_us / 2)


#: A what-if with no prediction whose interval reaches this share of the step saves no less
#: than that for all it shows: inconclusive, not evidence against its fix.
UNRULED_STEP_SHARE = 0.1


def measured_sentence(m: Any) -> str:
    """``Measured on your loop: ... µs less per step (predicted ...: holds).``; a what-if that
    measured no saving (its interval reaches zero or lies below it) says that instead: it is
    no fix on this loop, or, where its interval is too wide to rule the prediction out,
    inconclusive."""
    if not m.saves and not refutes(m):
        iv = m.interval_us
        span = f"95% interval {iv[0]:+,.0f} to {iv[1]:+,.0f} µs" if iv else "one pair"
        pred = (
            f", a saving of {m.predicted_us:,.0f} µs predicted"
            if m.predicted_us is not None
            else ""
        )
        if m.baseline_us and m.variant_us:
            # Which way its blocks leaned: "-457,715 to +64,133 µs" alone hid 144.65 ms as
            # written against 459.74 ms with XLA.
            pred += (
                f"; its blocks' medians {m.baseline_us:,.0f} µs as written, "
                f"{m.variant_us:,.0f} with it"
            )
        return (
            f"Measured on your loop, with {m.title}: inconclusive ({span} per step{pred}; "
            f"{m.pairs} pair{'s' if m.pairs != 1 else ''} of blocks): the machine's noise "
            "neither shows the saving nor rules it out."
        )
    if not m.saves:
        iv = m.interval_us
        span = f" (95% interval {iv[0]:+,.0f} to {iv[1]:+,.0f} µs)" if iv else " (one pair)"
        if m.verdict == "slower" and iv and iv[1] >= 0:
            # Slower by half again or more in every pair, an outlier block stretching the
            # interval over zero (``whatif_analysis.SLOWER_RATIO``).
            span = f" in each of its {m.pairs} pairs of blocks"
        else:
            span += " per step"
        what = "slower" if m.verdict == "slower" else "no measurable change"
        return (
            f"Measured on your loop, with {m.title}: {what}{span} "
            f"({m.baseline_us:,.0f} -> {m.variant_us:,.0f} µs a step): not a fix on this loop."
        )
    pred = (
        f"predicted {m.predicted_us:,.0f} µs: "
        + whatif_analysis.verdict_words(
            m.verdict,
            m.measured_us,
            m.predicted_us,
            getattr(m, "id", "") in whatif_analysis.LOWER_BOUND,
        )
        if m.predicted_us is not None
        else "not predicted"
    )
    change = "less" if m.measured_us >= 0 else "more"
    iv = m.interval_us
    res = (
        f" (95%: {iv[0]:,.0f}–{iv[1]:,.0f})"
        if iv
        else (f" ±{m.resolution_us:,.0f}" if m.resolution_us is not None else "")
    )
    return (
        f"Measured on your loop, with {m.title}: {abs(m.measured_us):,.0f}{res} µs {change} per "
        f"step ({m.baseline_us:,.0f} -> {m.variant_us:,.0f} µs; {pred})."
    )

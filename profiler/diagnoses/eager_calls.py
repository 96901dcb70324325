"""A function of the script that runs TensorFlow eagerly inside steps whose training is already
in tf.function calls: the actor called op by op at each environment step beside a compiled
update, a metric or a model evaluated eagerly between the compiled calls.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance``). ``eager_call_facts`` reads the steps' loop
(``script.auto_step``: the functions its body calls) and the sampled phase's stacks
(``profiler.analysis.sampling.eager_share``). The eager finding of a step with no tf.function
(``eager_dispatch``) covers a step that is eager throughout; this one fires only where the steps
also call tf.functions, and names the function that is not one.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis import auto_step, sampling
from profiler.diagnoses.engine import Rule

#: The share of the sampled steps the eager function must hold (its samples with TensorFlow's
#: or Keras's Python under it, outside any tf.function) ...
MIN_SHARE = 0.2
#: ... from at least this many samples inside steps.
MIN_SAMPLES = 50


def eager_call_facts(f: dict[str, Any], trace: Any) -> None:
    """The function the steps' loop calls that runs TensorFlow eagerly, and its share."""
    if f.get("framework") != "tf2" or f.get("mode") != "function" or f.get("eager_switch"):
        return
    auto = (trace.script or {}).get("auto_step") or {}
    calls = [str(c) for c in auto.get("calls") or ()]
    rec = trace.phase("sampled")
    step = float(f.get("step_us") or 0.0)
    if not auto.get("chosen_line") or not calls or rec is None or not rec.samples or not step:
        return
    # The script's tf.functions are graphs already: their names are no eager function.
    compiled = {str(fn.get("name", "")).rsplit(".", 1)[-1] for fn in _functions(trace)}
    names = [c for c in calls if c not in compiled]
    got = sampling.eager_share(rec.samples, names)
    if got is None:
        return
    name, share, n = got
    if share < MIN_SHARE or n < MIN_SAMPLES:
        return
    f["eager_fn"] = name
    f["eager_fn_line"] = auto_step.chosen_where(auto).removeprefix("line ")
    f["eager_fn_pct"] = 100 * share
    f["eager_fn_us"] = share * step
    f["eager_fn_samples"] = n


def _functions(trace: Any) -> list[dict[str, Any]]:
    return list((trace.script or {}).get("functions") or [])


RULES = (
    Rule(
        id="eager_call_in_loop",
        subject="workload",
        needs=("label", "step_us", "eager_fn", "eager_fn_line", "eager_fn_pct", "eager_fn_us"),
        when=lambda f: True,
        message="{label}: {eager_fn}, called by the loop at line {eager_fn_line}, runs its "
        "TensorFlow ops eagerly, one at a time, beside the step's tf.function calls: "
        "{eager_fn_pct:.0f}% of each step ({eager_fn_us:,.0f} µs of the {step_us:,.0f} µs step, "
        "from the sampled steps).",
        fix="Run {eager_fn}'s TensorFlow work in a tf.function (decorate the function that calls "
        "the model, keeping .numpy() and the numpy work outside it): its ops then run as one "
        "graph call: about {eager_fn_us:,.0f} µs less per step, less the call's own cost (a few "
        "hundred µs). Keras's DDPG example, its actor called eagerly at each environment step: "
        "the step 23.9 -> 13.1 ms with the actor in a tf.function, without the profiler.",
        cost="eager_fn_us",
    ),
)

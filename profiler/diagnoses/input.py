"""Input-bound steps: the time a step waits for its next batch, and what the pipeline lacks.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance``). ``input_facts`` reads the attribution's input parts
(``feed_fetch.data_ops``: tf.data's iterator kernels inside the step, from the framework trace;
``feed_fetch.input``: a tf.data iterator's ``next`` between a loop's calls, from the hooks) and
the structure of the pipeline the script iterated (``script.pipelines``, recorded by
``profiler.capture.script.pipeline``), and builds the fix from what that pipeline lacks: only
the changes that apply to it, each naming the stage it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profiler.diagnoses.engine import Facts, Rule

#: Attribution parts that are a step waiting for its input.
INPUT_PARTS = ("feed_fetch.data_ops", "feed_fetch.input")
#: Sources whose elements are already in memory: caching after an expensive map costs nothing
#: beyond the mapped data's size.
IN_MEMORY = frozenset({"from_tensor_slices", "from_tensors", "range"})
#: A step waiting this share of its time for input is input-bound.
INPUT_BOUND_PCT = 30


def input_facts(f: dict[str, Any], parts: Mapping[str, float], trace: Any) -> None:
    """``input_us``/``input_pct``, the pipeline in words and the fix that applies to it."""
    waits = [parts[p] for p in INPUT_PARTS if p in parts]
    step = f["step_us"]
    if not waits or not step:
        return
    f["input_us"] = sum(waits)
    f["input_pct"] = 100 * f["input_us"] / step
    f["rest_us"] = max(step - f["input_us"], 0.0)
    pipelines = (trace.script or {}).get("pipelines") or []
    # The most iterated pipeline feeds the steps (a validation set is iterated less often).
    pipe = pipelines[0] if pipelines else {}
    stages = pipe.get("stages") or []
    f["pipeline"] = describe(stages) if stages else "not recorded (no tf.data iterated)"
    epochs = ((trace.script or {}).get("fit") or {}).get("epochs")
    if not epochs and pipe.get("iterations"):
        epochs = pipe["iterations"]
    f["input_fix"] = fixes(pipe, f["input_us"], f["rest_us"], epochs)


def describe(stages: Sequence[Mapping[str, Any]]) -> str:
    """``from_tensor_slices -> map(fn, serial, runs Python f (x.py:3)) -> batch(32)``."""
    out = []
    for s in stages:
        kind = s["kind"]
        args = []
        if kind == "map":
            args.append(_name(s.get("function", "")) or "fn")
            args.append(f"num_parallel_calls={s['parallel']}" if s.get("parallel") else "serial")
            if s.get("python"):
                args.append(f"runs Python {s['python']}")
            if s.get("random"):
                args.append("random")
        elif s.get("detail"):
            args.append(s["detail"])
        out.append(f"{kind}({', '.join(args)})" if args else kind)
    return " -> ".join(out)


def fixes(pipe: Mapping[str, Any], input_us: float, rest_us: float, epochs: Any) -> str:
    """The changes that apply to this pipeline, most effective first.

    Measured on this machine (tests/realworld/tf_data_input_bound.py, 2 cores, TensorFlow
    2.21): a cache after a py_function map made epochs 2 and 3 ~5x faster; parallel calls of
    that py_function map did not help (the GIL), nor did an explicit prefetch (tf.data injects
    one). So a cache comes first, parallel calls only for maps without Python, and a prefetch
    only where tf.data does not add one itself.
    """
    stages = pipe.get("stages") or []
    if not stages:
        return (
            "Feed the steps from a tf.data pipeline that maps in parallel "
            "(num_parallel_calls=tf.data.AUTOTUNE) and ends in .prefetch(tf.data.AUTOTUNE), "
            "so the next batch is prepared while this step computes."
        )
    kinds = [s["kind"] for s in stages]
    out = []
    for i, s in enumerate(stages):
        if s["kind"] != "map":
            continue
        name = _name(s.get("function", "")) or "fn"
        if "cache" not in kinds[i + 1 :] and not s.get("random") and _int(epochs) != 1:
            same = (
                "if its result is the same every epoch"
                if s.get("python")
                else "its result is the same every epoch"
            )
            where = "" if kinds[0] in IN_MEMORY else " (.cache(filename) if it does not fit)"
            times = f", instead of {_int(epochs)} times" if _int(epochs) > 1 else ""
            out.append(
                f".cache() right after map({name}) ({same}): it then runs on the first epoch "
                f"only{times}{where}"
            )
        if s.get("python"):
            out.append(
                f"map({name}) runs Python ({s['python']}) for every element through "
                "tf.py_function, which holds the GIL (parallel calls of it barely overlap): "
                "write it in TensorFlow ops (tf.image, tf.math), which tf.data runs in parallel"
            )
        elif not s.get("parallel") and not (pipe.get("auto_parallel") and not s.get("random")):
            out.append(f"map({name}, num_parallel_calls=tf.data.AUTOTUNE)")
    if kinds[-1] != "prefetch" and pipe.get("auto_prefetch") is not True:
        saving = min(input_us, rest_us)
        out.append(
            ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline, so the next batch is "
            f"prepared while this step computes (up to {saving:,.0f} µs a step: the smaller of "
            f"the input wait, {input_us:,.0f} µs, and the rest of the step, {rest_us:,.0f} µs)"
        )
    if not out:
        return (
            "The pipeline already maps in parallel and prefetches: the input work itself is "
            f"slower ({input_us:,.0f} µs a step) than the rest of the step ({rest_us:,.0f} µs): "
            "make each element cheaper, cache what does not change, or read fewer, larger "
            "records."
        )
    return "; ".join(out) + "."


def _name(where: str) -> str:
    return where.split(" (", 1)[0]


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def not_input_bound(f: Facts) -> bool:
    """Whether the step is not mostly waiting for input (overhead advice applies then)."""
    return (f.get("input_pct") or 0) < INPUT_BOUND_PCT


RULES: tuple[Rule, ...] = (
    Rule(
        id="input_bound",
        subject="workload",
        needs=("label", "step_us", "input_us", "input_pct", "pipeline", "input_fix"),
        when=lambda f: f["input_pct"] >= INPUT_BOUND_PCT,
        message="{label} is input-bound: {input_pct:.0f}% of each {step_us:,.0f} µs step "
        "({input_us:,.0f} µs) waits for the next batch from tf.data. The pipeline: {pipeline}.",
        fix="{input_fix}",
        cost="input_us",
    ),
)

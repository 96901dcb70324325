"""Performance diagnoses and the attribution's cross-checks, from a run's summary entries.

Place in the pipeline: analysis (pure), called by ``profiler.summary`` once every workload's
attribution and the experiments are summarised. ``facts`` flattens one workload's figures (and
the experiments it is the baseline of) into a dict; ``RULES`` is the table of diagnoses
(``profiler.diagnoses.Rule``): each a condition over those facts, a message and a fix whose
numbers all come from the run. A fix quotes the saving the experiments *measured* where one
exists; otherwise the rule says what to try.

Cross-checks (written into each workload's ``attribution.checks``):

* ``compute`` against the kernel time ``step_stats`` measured (TF1): within ±50%;
* ``compute`` share against the share the size sweep implies, b·n / (a + b·n): within ±15
  points (numpy workloads, whose per-sample cost is the arithmetic itself).
"""

from __future__ import annotations

from typing import Any

from profiler.diagnoses import Rule, evaluate

#: Experiment pairs whose measured saving a fix may quote: pair name -> fact name.
PAIR_FACTS = {
    "data in the graph": "nofeed_saving_us",
    "feed float32": "f32_saving_us",
    "fetch only the train op": "trainonly_saving_us",
    "loop in the graph (tf.while_loop)": "graphloop_saving_us",
    "loop inside one tf.function": "functionloop_saving_us",
    "tf.function per step": "function_step_saving_us",
}

KERNEL_CHECK_TOLERANCE = 0.5
SWEEP_CHECK_POINTS = 0.15


def _att(entry: dict[str, Any]) -> dict[str, Any] | None:
    return entry.get("attribution") if entry.get("status") == "ok" else None


def facts(entry: dict[str, Any], experiments: dict[str, Any] | None) -> dict[str, Any] | None:
    """The flat figures of one workload the rules read; None if it has no attribution."""
    att = _att(entry)
    if att is None:
        return None
    typ = att["typical_us"]
    parts = att["parts_us"]
    step = att["reference_us"]
    f: dict[str, Any] = {
        "name": entry["name"],
        "label": entry["label"],
        "framework": entry["framework"],
        "n": (entry.get("params") or {}).get("n"),
        "step_us": step,
        "compute_us": typ["compute"],
        "dispatch_us": typ["dispatch"],
        "feed_fetch_us": typ["feed_fetch"],
        "python_us": typ["python"],
        "tracing_us": typ["tracing"],
        "other_us": typ["other"],
        "overhead_pct": 100 * att["overhead_share"],
        "feed_us": parts.get("feed_fetch.feed"),
        "cast_us": parts.get("feed_fetch.cast"),
        "fetch_value_us": parts.get("feed_fetch.fetch_value"),
        "per_call_us": parts.get("dispatch.per_call"),
        "flops": (entry.get("work") or {}).get("flops_per_step"),
        "eager": entry["framework"] == "tf2" and "dispatch.per_call" not in parts,
        "units_per_step": (entry.get("work") or {}).get("units_per_step", 1),
    }
    if f["flops"]:
        f["flops"] //= max((entry.get("work") or {}).get("units_per_step", 1), 1)
    else:
        f["flops"] = None  # a user's script declares no arithmetic
    if f["feed_us"] is not None:
        f["feed_pct"] = 100 * f["feed_us"] / step if step else None
    if f["fetch_value_us"] is not None:
        f["fetch_value_pct"] = 100 * f["fetch_value_us"] / step if step else None
    f["python_dispatch_pct"] = 100 * (typ["python"] + typ["dispatch"]) / step if step else None
    f["tracing_pct"] = 100 * typ["tracing"] / step if step else None
    for pair in (experiments or {}).get("pairs", []):
        key = PAIR_FACTS.get(pair["name"])
        if key and pair["baseline"] == entry["name"] and pair["status"] == "ok":
            f[key] = pair["measured_saving_us"]
            f[key.replace("_saving_us", "_variant_us")] = pair["variant_us"]
            if pair["variant_us"]:
                f[key.replace("_saving_us", "_speedup")] = pair["baseline_us"] / pair["variant_us"]
    sweep = ((experiments or {}).get("sweep") or {}).get(entry["name"]) or {}
    fit = sweep.get("fit")
    if fit and f["n"]:
        f["a_us"] = fit["a_us"]
        f["b_ns"] = fit["b_ns_per_sample"]
        f["fixed_pct"] = 100 * fit["a_us"] / (fit["a_us"] + fit["b_ns_per_sample"] * f["n"] / 1e3)
        f["n_even"] = (
            fit["a_us"] * 1e3 / fit["b_ns_per_sample"] if fit["b_ns_per_sample"] > 0 else None
        )
    return f


RULES: tuple[Rule, ...] = (
    Rule(
        id="overhead_bound_measured",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "overhead_pct",
            "compute_us",
            "flops",
            "graphloop_saving_us",
            "graphloop_variant_us",
        ),
        when=lambda f: f["overhead_pct"] >= 50,
        message="{label}: {overhead_pct:.0f}% of each {step_us:.0f} µs step is overhead; the "
        "arithmetic ({flops:,} flops) takes {compute_us:.1f} µs of kernels.",
        fix="Run many steps per call: the same loop inside one session.run (tf.while_loop) "
        "measured {graphloop_variant_us:.1f} µs per step, {graphloop_saving_us:.0f} µs less.",
    ),
    Rule(
        id="overhead_bound",
        subject="workload",
        needs=("label", "step_us", "overhead_pct", "compute_us", "flops"),
        when=lambda f: (
            f["overhead_pct"] >= 50
            and f["units_per_step"] == 1
            and f.get("graphloop_saving_us") is None
            and f.get("function_step_saving_us") is None
            and f["framework"] != "numpy"
        ),
        message="{label}: {overhead_pct:.0f}% of each {step_us:.0f} µs step is overhead; the "
        "arithmetic ({flops:,} flops) takes {compute_us:.1f} µs of kernels.",
        fix="Do more work per framework call: larger batches, or the loop inside the graph "
        "(tf.while_loop, a tf.function running several steps, Keras steps_per_execution).",
    ),
    Rule(
        id="overhead_bound_script",
        subject="workload",
        needs=("label", "step_us", "overhead_pct", "compute_us"),
        when=lambda f: (
            f["overhead_pct"] >= 50
            and f.get("flops") is None
            and f["units_per_step"] == 1
            and f["framework"] != "numpy"
        ),
        message="{label}: {overhead_pct:.0f}% of each {step_us:.0f} µs step is overhead; "
        "kernels take {compute_us:.1f} µs.",
        fix="Do more work per framework call: larger batches, or the loop inside the graph "
        "(tf.while_loop, a tf.function running several steps, Keras steps_per_execution).",
    ),
    Rule(
        id="feed_dict_cost_measured",
        subject="workload",
        needs=("label", "feed_us", "feed_pct", "cast_us", "nofeed_saving_us"),
        when=lambda f: f["feed_pct"] >= 10,
        message="{label}: feed_dict costs {feed_us:.0f} µs per step ({feed_pct:.0f}% of the "
        "step) in Python; converting the fed arrays' dtype is {cast_us:.1f} µs of it.",
        fix="Keep the data in the graph (constants, a variable, or tf.data): measured "
        "{nofeed_saving_us:.0f} µs less per step, more than the Python-side feed cost alone.",
    ),
    Rule(
        id="feed_dict_cost",
        subject="workload",
        needs=("label", "feed_us", "feed_pct", "cast_us"),
        when=lambda f: f["feed_pct"] >= 10 and f.get("nofeed_saving_us") is None,
        message="{label}: feed_dict costs {feed_us:.0f} µs per step ({feed_pct:.0f}% of the "
        "step) in Python; converting the fed arrays' dtype is {cast_us:.1f} µs of it.",
        fix="Keep the data in the graph (constants, a variable, or tf.data) instead of feeding "
        "the same arrays every step.",
    ),
    Rule(
        id="loss_fetch_measured",
        subject="workload",
        needs=("label", "fetch_value_us", "fetch_value_pct", "trainonly_saving_us"),
        when=lambda f: f["fetch_value_pct"] >= 3,
        message="{label}: fetching the loss every step costs {fetch_value_us:.0f} µs "
        "({fetch_value_pct:.0f}% of the step) in fetch handling.",
        fix="Fetch the loss every N steps: fetching only the train op measured "
        "{trainonly_saving_us:.0f} µs less per step.",
    ),
    Rule(
        id="eager_dispatch",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "python_us",
            "dispatch_us",
            "compute_us",
            "python_dispatch_pct",
            "function_step_saving_us",
            "function_step_speedup",
        ),
        when=lambda f: f["eager"] and f["python_dispatch_pct"] >= 50,
        message="{label}: eager execution spends {python_us:.0f} µs per step in Python and "
        "{dispatch_us:.0f} µs dispatching ops one by one, for {compute_us:.0f} µs of kernels.",
        fix="Wrap the step in tf.function: measured {function_step_saving_us:.0f} µs less per "
        "step ({function_step_speedup:.1f}× faster).",
    ),
    Rule(
        id="numpy_fixed_cost",
        subject="workload",
        needs=("label", "n", "a_us", "b_ns", "fixed_pct", "n_even"),
        when=lambda f: f["framework"] == "numpy" and f["fixed_pct"] >= 50,
        message="{label}: at n = {n:,} a step is {fixed_pct:.0f}% fixed per-call cost (the size "
        "sweep fits {a_us:.1f} µs + {b_ns:.2f} ns per sample).",
        fix="The arithmetic only outweighs the per-call cost above n ≈ {n_even:,.0f}: process "
        "more samples per numpy call (vectorise across steps or batch more data).",
    ),
    Rule(
        id="steady_tracing",
        subject="workload",
        needs=("label", "tracing_us", "tracing_pct"),
        when=lambda f: f["tracing_pct"] >= 1,
        message="{label}: {tracing_us:.0f} µs per steady-state step ({tracing_pct:.1f}%) goes to "
        "tracing or retracing.",
        fix="Give tf.function a stable input signature (same shapes and dtypes, tensors not "
        "Python numbers) so it traces once.",
    ),
)


def diagnose(entries: list[dict[str, Any]], experiments: dict[str, Any] | None) -> list[dict]:
    """Every rule that fires on every workload of the run, as summary objects."""
    all_facts = [f for f in (facts(e, experiments) for e in entries) if f is not None]
    return [d.to_json() for d in evaluate(RULES, "workload", all_facts)]


def cross_check(entries: list[dict[str, Any]], experiments: dict[str, Any] | None) -> None:
    """Add ``checks`` to each workload's attribution (see the module docstring)."""
    for entry in entries:
        att = _att(entry)
        if att is None:
            continue
        checks = att.setdefault("checks", [])
        units = max((entry.get("work") or {}).get("units_per_step", 1), 1)
        for phase in entry.get("phases", []):
            table = (phase.get("data") or {}).get("op_table") or {}
            if phase["name"] == "framework" and table.get("source") == "step_stats":
                ref = table["kernel_ns_per_step"] / units / 1e3
                value = att["typical_us"]["compute"]
                checks.append(
                    {
                        "name": "compute vs step_stats kernel time",
                        "value": value,
                        "reference": ref,
                        "tolerance": f"±{KERNEL_CHECK_TOLERANCE:.0%}",
                        "ok": ref > 0 and abs(value - ref) <= KERNEL_CHECK_TOLERANCE * ref,
                    }
                )
        sweep = ((experiments or {}).get("sweep") or {}).get(entry["name"]) or {}
        fit = sweep.get("fit")
        n = (entry.get("params") or {}).get("n")
        # Only for numpy: there the per-sample cost is the arithmetic. A TF step's per-sample
        # cost also holds feed conversion and copies, so b·n overstates nothing but compute.
        if fit and n and entry["framework"] == "numpy":
            implied = fit["b_ns_per_sample"] * n / (fit["a_us"] * 1e3 + fit["b_ns_per_sample"] * n)
            value = att["share"]["compute"]
            checks.append(
                {
                    "name": "compute share vs the size sweep's b·n / (a + b·n)",
                    "value": value,
                    "reference": implied,
                    "tolerance": f"±{SWEEP_CHECK_POINTS * 100:.0f} points",
                    "ok": abs(value - implied) <= SWEEP_CHECK_POINTS,
                }
            )

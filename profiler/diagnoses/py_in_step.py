"""Python called from inside the step: a ``tf.function`` step whose graph calls a Python
function through ``tf.py_function`` or ``tf.numpy_function`` (a numpy or scikit-learn metric,
an augmentation written in numpy) runs it, under the GIL, in every call.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``py_facts`` and includes ``RULES``). It reads the
Python functions the script's own ``tf.function`` graphs call (``script.functions[].
python_calls``, read from their traced graphs by the script process) and the framework phase's
op table: the py_function kernels' time per step against that window's own mean step (no
figure from another window). A py_function in a ``tf.data`` map runs in the input pipeline
(``input_bound`` names it); only a function the step's own graph calls is this finding's.

Measured on this machine (a custom train step computing a rank AUC in numpy through
``tf.py_function`` every step, the Q&A idiom for scikit-learn's ``roc_auc_score`` as a metric):
the step 948 µs with it against 651 µs without, 31% of the step, measured without the
profiler; the profiler read "kernels for input pipeline (EagerPyFunc 46%)" with the advice to
move input work into a tf.data map, and beside a busy process did not name it at all.
"""

from __future__ import annotations

from typing import Any

from profiler.diagnoses.engine import Rule

#: The kernels of a Python call in a graph.
PY_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
#: A step function calls Python when the function with the Python call ran at least this share
#: of the steps' calls (a validation step's py_function is not the training step's).
MIN_CALLS_PER_STEP = 0.5
#: The finding: the Python call holds at least this share of the framework window's mean step.
MIN_SHARE_PCT = 10


def py_facts(f: dict[str, Any], trace: Any) -> None:
    """The Python the step's graph calls, and its kernels' time per step in the framework
    window against that window's mean step."""
    script = trace.script or {}
    steps = int(script.get("steps") or 0)
    names: list[str] = []
    for fn in script.get("functions") or []:
        if (
            fn.get("own")
            and fn.get("python_calls")
            and fn.get("calls", 0) >= MIN_CALLS_PER_STEP * steps
        ):
            names += [n for n in fn["python_calls"] if n not in names]
    if not names:
        return
    f["py_step_calls"] = ", ".join(names)
    fw = trace.data("framework")
    table = (fw.xplane_op_table or fw.op_table) if fw is not None else None
    rec = trace.phase("framework")
    if table is None or not table.steps or rec is None or rec.window is None:
        return
    durations = list(rec.window.durations_ns())
    if not durations:
        return
    window_step = sum(durations) / len(durations)
    py_ns = (
        sum(r.total_ns for r in table.rows if r.kernel in PY_OPS and not r.input_thread)
        / table.steps
    )
    if window_step <= 0 or py_ns <= 0:
        return
    share = min(py_ns / window_step, 1.0)
    f["py_step_pct"] = 100 * share
    f["py_step_window_us"] = py_ns / 1e3
    f["py_step_window_step_us"] = window_step / 1e3
    # At the timed step's speed (the framework window slows the step it profiles).
    f["py_step_us"] = share * float(f.get("step_us") or 0.0)


def python_in_step(f: Any) -> bool:
    """Whether the step's own graph calls Python that holds enough of the step to name."""
    return (f.get("py_step_pct") or 0.0) >= MIN_SHARE_PCT


RULES: tuple[Rule, ...] = (
    Rule(
        id="py_function_in_step",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "py_step_calls",
            "py_step_pct",
            "py_step_us",
            "py_step_window_us",
            "py_step_window_step_us",
        ),
        when=python_in_step,
        message="{label}: the step's graph calls Python through tf.py_function "
        "({py_step_calls}): {py_step_pct:.0f}% of each step, about {py_step_us:,.0f} µs of the "
        "{step_us:,.0f} µs step ({py_step_window_us:,.0f} µs of the framework window's "
        "{py_step_window_step_us:,.0f} µs step), run under the GIL in every call.",
        fix="Call it every N steps, or outside the step on the values the step returns, or "
        "write it in TensorFlow ops; more steps per call or larger batches leave a per-step "
        "Python call in place.",
        cost="py_step_us",
    ),
)

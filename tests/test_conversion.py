"""numpy making arrays out of Python lists at its calls, told from its per-call cost."""

from __future__ import annotations

from types import SimpleNamespace

from profiler.diagnoses import conversion, loops
from profiler.diagnoses.engine import evaluate
from profiler.model.trace import Frame, Sample

SCRIPT = "/home/u/w2v.py"


def _trace(native: bool, converting: int, other: int) -> SimpleNamespace:
    """A numpy skip-gram's sampled steps: ``converting`` samples in numpy's reading of a
    list (under the script's line 66), ``other`` in a matrix product."""
    top = (Frame("<module>", SCRIPT, 90), Frame("forward_pass", SCRIPT, 66))
    convert = (Frame("PyArray_DiscoverDTypeAndShape_Recursive", native=True),)
    product = (Frame("cblas_sgemv", native=True),) if native else ()
    samples = (
        Sample(top + (convert if native else ()), converting),
        Sample(top + product, other),
    )
    sampled = SimpleNamespace(samples=samples)
    return SimpleNamespace(phase=lambda name: sampled if name == "sampled" else None)


def test_lists_made_arrays_at_each_call_are_named_with_their_line_not_as_small_arrays() -> None:
    # One-hot vectors kept as lists of 2,000: 497 µs a pair, 126 µs made arrays once, 49 µs
    # indexing the weights' row (without the profiler); read "the arrays are too small".
    f: dict = {"label": "w2v.py", "name": "w2v.py", "step_us": 480.0, "framework": "numpy"}
    conversion.conversion_facts(f, _trace(True, 60, 40))
    assert round(f["convert_pct"]) == 60 and round(f["convert_us"]) == 288
    (d,) = evaluate(conversion.RULES, "workload", [f])
    assert "60% of each 480 µs step is numpy making arrays out of Python lists" in d.message
    assert "at line 66 (forward_pass) 100%" in d.message
    assert "w[i], not np.dot(one_hot, w)" in d.fix
    # ... and the per-call finding ("the arrays are too small") gives way.
    busy = {**f, "dispatch_us": 350.0, "compute_us": 80.0, "python_us": 50.0}
    assert not loops._numpy_per_call(busy)
    assert loops._numpy_per_call({**busy, "convert_pct": 5.0})
    # Under the threshold, or without native frames to tell it by: nothing said.
    g: dict = {"label": "w2v.py", "name": "w2v.py", "step_us": 480.0}
    conversion.conversion_facts(g, _trace(True, 10, 90))
    assert not evaluate(conversion.RULES, "workload", [g])
    h: dict = {"label": "w2v.py", "name": "w2v.py", "step_us": 480.0}
    conversion.conversion_facts(h, _trace(False, 60, 40))
    assert "convert_pct" not in h

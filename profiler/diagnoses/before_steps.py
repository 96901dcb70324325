"""A script whose own data preparation before its first step holds a large share of its run.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``start_facts`` and includes ``RULES``).
``start_facts`` reads the parts of the time before the first step
(``profiler.analysis.before_steps``): the largest function of the user's own code there that
ran in Python or a package other than TensorFlow and Keras (building a model or a dataset there
is the framework's one-off work, not the script's). The finding fires when it holds
``MIN_SHARE`` of the script's time and ``MIN_S`` or more. The cost ranks with the per-step
findings as its time spread over the training steps.

TensorFlow's word2vec tutorial builds its skip-gram pairs in Python before training: 33-45% of
the script, 15-20x faster vectorised (measured without the profiler); it was unnamed, the time
split covering only the steps.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis import before_steps
from profiler.diagnoses.engine import Rule

#: The part's share of the script's wall time, and its seconds, worth a finding.
MIN_SHARE = 0.2
MIN_S = 0.5
#: What an own function may run in and be the script's own work (not the framework's set-up).
FRAMEWORKS = ("TensorFlow", "Keras")


def start_facts(f: dict[str, Any], trace: Any) -> None:
    """The largest own part before the first step, against the script's time."""
    script = trace.script or {}
    wall = float(script.get("wall_s") or 0.0)
    steps = int(script.get("steps") or 0)
    got = before_steps.analyse(trace.before_steps, script)
    if got is None or not wall or not steps:
        return
    parts = [p for p in got.own() if p.inside not in FRAMEWORKS]
    if not parts:
        return
    p = parts[0]
    f["start_part"] = before_steps.label(p.kind, p.function, p.file, p.line, p.inside)
    # The fix names it: the verdict quotes the fix alone ("It runs once" read as a riddle).
    f["start_where"] = f["start_part"].rsplit(" in ", 1)[0]
    f["start_s"] = p.seconds
    f["start_pct"] = 100 * p.seconds / wall
    # The loop's iterations watched to choose it are steps (as the time budget line says).
    t = script.get("time") or {}
    watched_s = float(t.get("watched_s") or 0.0)
    watched = int((script.get("auto_step") or {}).get("watched_iterations") or 0)
    f["start_before_s"] = max(got.before_s - watched_s, 0.0)
    f["start_script_s"] = wall
    f["start_steps"] = steps + watched
    f["start_steps_s"] = float(t.get("steps_s") or 0.0) + watched_s
    f["start_cost_per_step_us"] = p.seconds * 1e6 / (steps + watched)
    f["start_fix"] = (
        "compute it once and save the result (np.save) for later runs to load, and where it "
        "loops over items in Python, vectorise it (whole-array numpy operations)"
        if p.inside == before_steps.OWN_PYTHON
        else f"compute it once and save the result (np.save) for later runs to load, or call "
        f"{p.inside} on whole arrays rather than item by item"
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="slow_start",
        subject="workload",
        needs=(
            "label",
            "start_part",
            "start_where",
            "start_s",
            "start_pct",
            "start_before_s",
            "start_script_s",
            "start_steps",
            "start_steps_s",
            "start_fix",
            "start_cost_per_step_us",
        ),
        when=lambda f: f["start_pct"] >= 100 * MIN_SHARE and f["start_s"] >= MIN_S,
        message="{label}: before its first step the script spent {start_s:,.1f} s in "
        "{start_part}, {start_pct:.0f}% of its {start_script_s:,.1f} s (of {start_before_s:,.1f} "
        "s before the first step); its {start_steps:,} training steps took {start_steps_s:,.1f} "
        "s. The time split below covers the steps only.",
        fix="{start_where} runs once, before training: {start_fix}.",
        cost="start_cost_per_step_us",
        share="start_pct",
        lead="{start_part}, before the first step, took {start_pct:.0f}% of the script's "
        "{start_script_s:,.1f} s",
    ),
)

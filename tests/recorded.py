"""A recorded run of the default suite, checked in under ``tests/data/recorded/``.

The analysis, summary and report tests read it instead of running the suite: what the
measured processes wrote (each workload's ``model.json.gz``, ``experiments.json``,
``efficiency.json``) and the run's ``summary.json`` (for the workloads' names, statuses and
parameters). ``summary_of_recording()`` analyses it as a live run would be analysed, with a
fixed run record and environment, so the result is the same on every machine: it is what
``golden_summary.json`` holds.

Re-record (a short suite run, ~2 minutes; then regenerate the golden files)::

    .venv/bin/python -m tests.recorded
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "tests" / "data" / "recorded"
#: The working directory the recording was made in (its traces' absolute paths start there).
RECORDED_CWD = "/work/main"
GOLDEN_SUMMARY = REPO / "tests" / "data" / "golden_summary.json"
GOLDEN_REPORT = REPO / "tests" / "data" / "golden_report.html"

#: The environment and run record the golden summary is built with (never this machine's).
ENVIRONMENT: dict[str, Any] = {
    "python": "3.11.7",
    "implementation": "CPython",
    "system": "Linux",
    "machine": "x86_64",
    "cpu": {"model": "recorded", "count": 2, "usable": 2},
    "packages": {"numpy": "2.x", "tensorflow": "2.21.0"},
    "variables": {"TF_CPP_MIN_LOG_LEVEL": "2"},
}


def load() -> tuple[list[Any], dict[str, Any] | None, dict[str, Any] | None]:
    """The recorded outcomes, ``experiments.json`` and ``efficiency.json``."""
    from profiler.processes.runner import outcome_from_summary

    doc = json.loads((RECORDED / "summary.json").read_text())
    outcomes = [
        outcome_from_summary(e, RECORDED / "workloads" / e["slug"] / "model.json.gz")
        for e in doc["workloads"]
    ]

    def raw(name: str) -> dict[str, Any] | None:
        path = RECORDED / name
        return json.loads(path.read_text()) if path.is_file() else None

    return outcomes, raw("experiments.json"), raw("efficiency.json")


def summary_of_recording() -> dict[str, Any]:
    """The summary document of the recorded run, as the pipeline builds it."""
    from profiler.analysis.run import analyse
    from profiler.reports import summary

    doc = json.loads((RECORDED / "summary.json").read_text())
    outcomes, experiments, efficiency = load()
    run = doc["run"]
    info = summary.RunInfo(
        run_id=run["id"],
        phases=list(run["phases"]),
        started=0.0,
        finished=float(run["wall_s"]),
        status=run["status"],
        options=dict(run["options"]),
    )
    # Paths are shortened relative to the working directory: the recording's, wherever the
    # checkout that replays it is (a clean clone elsewhere shortens them the same way).
    with mock.patch("os.getcwd", return_value=RECORDED_CWD):
        out = summary.build(info, analyse(outcomes, experiments, efficiency), ENVIRONMENT)
    out["run"]["started"] = run["started"]
    return out


def record() -> Path:
    """Run the short suite and keep what the measured processes wrote (module docstring)."""
    from profiler import workloads
    from profiler.capture.phases import registry
    from profiler.processes import pipeline
    from profiler.processes.runner import RunOptions

    specs = [workloads.get(n) for n in workloads.default_suite()]
    out = Path(tempfile.mkdtemp(prefix="tlp-record-"))
    opts = RunOptions(
        workloads=specs,
        params={s.name: s.defaults.with_(steps=max(s.defaults.steps // 8, 50)) for s in specs},
        phases=list(registry.DEFAULT_PHASES),
        out_root=out,
        timeout_s=300,
        progress=False,
        options={"time_scale": 0.3},
        experiments=True,
        sweep_sizes=[10, 1_000, 10_000],
        experiment_overrides={"blocks": 4, "block_s": 0.05, "pair_max_s": 0.3},
        efficiency_overrides={
            "seeds": [0],
            "budgets": {"numpy": 20_800, "keras": 12_480, "keras_adam_zeroinit": 12_480},
        },
    )
    result = pipeline.execute(opts)
    shutil.rmtree(RECORDED, ignore_errors=True)
    (RECORDED / "workloads").mkdir(parents=True)
    for w in result.summary["workloads"]:
        src = result.run_dir / "workloads" / w["slug"] / "model.json.gz"
        if src.is_file():
            (RECORDED / "workloads" / w["slug"]).mkdir()
            shutil.copy(src, RECORDED / "workloads" / w["slug"] / "model.json.gz")
    for name in ("experiments/experiments.json", "efficiency/efficiency.json"):
        src = result.run_dir / name
        if src.is_file():
            raw = json.loads(src.read_text())
            # What the pipeline adds to each process's result file.
            raw.setdefault("status", "ok")
            raw.setdefault("error", "")
            if name.startswith("efficiency"):
                raw["wall_s"] = result.summary["efficiency"]["wall_s"]
            (RECORDED / Path(name).name).write_text(json.dumps(raw, indent=1) + "\n")
    keep = ("name", "label", "slug", "title", "seed", "framework", "status", "error", "wall_s")
    slim = {
        "run": result.summary["run"],
        "workloads": [
            {**{k: w[k] for k in keep}, "params": w["params"]} for w in result.summary["workloads"]
        ],
    }
    (RECORDED / "summary.json").write_text(json.dumps(slim, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    return RECORDED


def write_golden() -> None:
    """``golden_summary.json`` and ``golden_report.html`` from the recording."""
    from profiler.reports import html, summary, viewmodel

    doc = summary_of_recording()
    summary.validate(doc)
    GOLDEN_SUMMARY.write_text(summary.dumps(doc))
    GOLDEN_REPORT.write_text(html.render(viewmodel.build(doc), library=None))


if __name__ == "__main__":
    if "--golden-only" not in sys.argv:
        print(f"recorded: {record()}")
    write_golden()
    print(f"golden: {GOLDEN_SUMMARY.name}, {GOLDEN_REPORT.name}")

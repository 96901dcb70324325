"""A recorded run of the default suite, checked in under ``tests/data/recorded/``.

The analysis, summary and report tests read it instead of running the suite: what the
measured processes wrote (each workload's ``model.json.gz``, ``experiments.json``,
``efficiency.json``) and the run's ``summary.json`` (for the workloads' names, statuses and
parameters). ``summary_of_recording()`` analyses it as a live run would be analysed, with a
fixed run record and environment, so the result is the same on every machine: it is what
``golden_summary.json`` holds.

Re-record (a short suite run, ~2 minutes; then regenerate the golden files)::

    .venv/bin/python -m tests.recorded

Script runs are recorded the same way, one folder each under ``tests/data/recorded_scripts/``
(a script profiled with no options, as a user runs it; its traces and a slim summary): the
findings tests read them with ``summary_of_script(name)``, and the same test runs live under
the ``live`` marker (``make live``). Re-record one (``--busy``: beside a busy process, for a
test about load; run options after ``--``)::

    .venv/bin/python -m tests.recorded --script tests/data/corpus/SCRIPT.py NAME [--busy]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "tests" / "data" / "recorded"
#: The working directory the recording was made in (its traces' absolute paths start there).
RECORDED_CWD = "/work/main"
#: Script runs recorded with no options (``record_script``), one folder each.
SCRIPTS = REPO / "tests" / "data" / "recorded_scripts"
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
    doc = json.loads((RECORDED / "summary.json").read_text())
    return _analysed(doc, *load())


def summary_of_script(name: str) -> dict[str, Any]:
    """The summary document of a recorded script run (``SCRIPTS / name``), as the pipeline
    builds it from the same traces: analysis, diagnoses and the answer are checked on it
    with no TensorFlow and no timing (the live run is the same test under ``realworld``)."""
    if not (SCRIPTS / name / "summary.json").is_file():
        raise FileNotFoundError(f"no recorded run {name!r}: python -m tests.recorded --script")
    return summary_of_run(SCRIPTS / name)


def summary_of_run(folder: Path) -> dict[str, Any]:
    """A run folder's summary built again from its traces (no experiments or efficiency)."""
    from profiler.processes.launch import outcome_from_summary

    doc = json.loads((folder / "summary.json").read_text())
    outcomes = [
        outcome_from_summary(e, folder / "workloads" / e["slug"] / "model.json.gz")
        for e in doc["workloads"]
    ]
    return _analysed(doc, outcomes, None, None)


def answer_of(doc: dict[str, Any]) -> str:
    """The terminal's answer for a summary (what ``run`` prints above ``report:``)."""
    from profiler.reports import text, viewmodel

    return text.answer(viewmodel.build(doc))


def _analysed(
    doc: dict[str, Any],
    outcomes: list[Any],
    experiments: dict[str, Any] | None,
    efficiency: dict[str, Any] | None,
) -> dict[str, Any]:
    from profiler.analysis.run import analyse
    from profiler.reports import summary

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


#: A script test's two runs: the recorded one (make test) and a live one (make live).
MODES = [
    pytest.param("recorded", id="recorded"),
    pytest.param("live", id="live", marks=[pytest.mark.live, pytest.mark.slow]),
]


@dataclass(frozen=True)
class Profiled:
    """What a test reads of a script's run: its summary and the terminal's answer."""

    doc: dict
    answer: str

    @property
    def findings(self) -> dict[str, dict]:
        return {d["rule"]: d for d in self.doc["diagnoses"]}

    @property
    def workload(self) -> dict:
        (w,) = self.doc["workloads"]
        return w


def profiled(
    mode: str, tmp_path: Path, script: Path, *args: str, name: str = "", busy: bool = False
) -> Profiled:
    """The script's recorded run (``SCRIPTS / name``, by default its file's stem; recorded with
    these ``args``), or a live run of it (beside a busy process where the recording was)."""
    from tests.test_script_run import cli, only_run

    if mode == "recorded":
        doc = summary_of_script(name or script.stem)
        return Profiled(doc, answer_of(doc))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        out = cli(tmp_path, *args, str(script), timeout=900)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    return Profiled(doc, out.stdout.split("report:")[0])


def record_script(script: Path, name: str, *args: str, busy: bool = False) -> Path:
    """Profile ``script`` with ``args`` (none: as a user runs it), from the checkout, beside a
    busy process if ``busy``, and keep its run's traces under ``SCRIPTS / name``: what
    ``summary_of_script`` analyses again."""
    out = Path(tempfile.mkdtemp(prefix="tlp-record-script-"))
    script = script.resolve()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "profiler", "run", "--out", str(out), *args, str(script)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
        )
        runs = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink()]
        if len(runs) != 1 or not (runs[0] / "summary.json").is_file():
            raise RuntimeError(f"{script}: no run was written\n{proc.stderr[-2000:]}")
        full = json.loads((runs[0] / "summary.json").read_text())
        dest = SCRIPTS / name
        shutil.rmtree(dest, ignore_errors=True)
        for w in full["workloads"]:
            (dest / "workloads" / w["slug"]).mkdir(parents=True)
            shutil.copy(
                runs[0] / "workloads" / w["slug"] / "model.json.gz",
                dest / "workloads" / w["slug"] / "model.json.gz",
            )
        keep = ("name", "label", "slug", "title", "seed", "framework", "status", "error")
        slim = {
            "run": full["run"],
            "workloads": [
                {**{k: w[k] for k in keep}, "wall_s": w["wall_s"], "params": w["params"]}
                for w in full["workloads"]
            ],
        }
        (dest / "summary.json").write_text(json.dumps(slim, indent=1) + "\n")
        return dest
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        shutil.rmtree(out, ignore_errors=True)


def write_golden() -> None:
    """``golden_summary.json`` and ``golden_report.html`` from the recording."""
    from profiler.reports import html, summary, viewmodel

    doc = summary_of_recording()
    summary.validate(doc)
    GOLDEN_SUMMARY.write_text(summary.dumps(doc))
    GOLDEN_REPORT.write_text(html.render(viewmodel.build(doc), library=None))


if __name__ == "__main__":
    if "--script" in sys.argv:
        # python -m tests.recorded --script PATH NAME [--busy] [-- RUN OPTIONS...]
        at = sys.argv.index("--script")
        rest = sys.argv[at + 1 :]
        opts = rest[rest.index("--") + 1 :] if "--" in rest else []
        print(f"recorded: {record_script(Path(rest[0]), rest[1], *opts, busy='--busy' in rest)}")
        sys.exit(0)
    if "--golden-only" not in sys.argv:
        print(f"recorded: {record()}")
    write_golden()
    print(f"golden: {GOLDEN_SUMMARY.name}, {GOLDEN_REPORT.name}")

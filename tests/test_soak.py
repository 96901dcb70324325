"""Runs that share one ``--out``: back to back and at the same time, every run complete, every
id distinct, ``latest`` always a valid link to a finished run, nothing temporary left behind.

The quick case runs in ``make test``; the default suite three times back to back, and four
concurrent runs with TensorFlow, run in ``make soak`` (minutes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.reports import summary
from profiler.workloads import default_suite
from tests.conftest import python_env


def _run(out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "profiler", "run", "--out", str(out), "--no-progress", *args],
        cwd=out.parent,
        env=python_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs: list[subprocess.Popen[str]], timeout: float) -> None:
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]


def _check_out_folder(out: Path, runs: int, workloads: int) -> list[Path]:
    """Every run finished and valid, ids distinct, latest a link to one of them, no debris."""
    entries = sorted(out.iterdir())
    finished = [p for p in entries if p.is_dir() and not p.is_symlink()]
    assert len(finished) == runs, [p.name for p in entries]
    assert not [p for p in entries if p.name.endswith(".partial") or p.name.endswith(".tmp")]
    for run in finished:
        doc = json.loads((run / "summary.json").read_text())
        summary.validate(doc)
        assert doc["run"]["status"] == "ok"
        assert doc["run"]["id"] == run.name
        assert len(doc["workloads"]) == workloads
        assert all(w["status"] == "ok" for w in doc["workloads"])
        assert (run / "report.html").stat().st_size > 0
    latest = out / "latest"
    assert latest.is_symlink()
    target = os.readlink(latest)
    assert target in {p.name for p in finished}
    return finished


@pytest.mark.slow
def test_four_concurrent_runs_into_one_out_folder(tmp_path):
    out = tmp_path / "runs"
    procs = [_run(out, "--workloads", "numpy_gd", "--phases", "timed") for _ in range(4)]
    _finish(procs, timeout=300)
    _check_out_folder(out, runs=4, workloads=1)


@pytest.mark.soak
def test_three_default_suite_runs_back_to_back(tmp_path):
    out = tmp_path / "runs"
    names = []
    for _ in range(3):
        _finish([_run(out)], timeout=3600)
        names.append(os.readlink(out / "latest"))
    finished = _check_out_folder(out, runs=3, workloads=len(default_suite()))
    assert len(set(names)) == 3 and names[-1] == max(p.name for p in finished)


@pytest.mark.soak
def test_four_concurrent_runs_with_tensorflow_into_one_out_folder(tmp_path):
    out = tmp_path / "runs"
    procs = [_run(out, "--workloads", "numpy_gd,tf1_gd,tf2_function_step") for _ in range(4)]
    _finish(procs, timeout=3600)
    _check_out_folder(out, runs=4, workloads=3)

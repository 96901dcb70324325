"""The command line end to end, and every bad-input case with its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profiler.reports import chrome_trace, summary, tensorboard
from tests.conftest import REPO, python_env


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profiler", *args],
        cwd=REPO,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_help_is_fast_and_imports_no_tensorflow():
    t0 = time.perf_counter()
    out = cli("--help")
    elapsed = time.perf_counter() - t0
    assert out.returncode == 0
    assert "exit status" in out.stdout
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, profiler.cli as c; c.build_parser(); "
            "import workloads; print('tensorflow' in sys.modules, 'numpy' in sys.modules)",
        ],
        cwd=REPO,
        env=python_env(),
        capture_output=True,
        text=True,
    )
    assert probe.stdout.split() == ["False", "False"]
    # Far below TensorFlow's ~2 s import; generous for a loaded machine.
    assert elapsed < 1.5


def test_list_names_every_registered_workload():
    from profiler import workloads

    out = cli("list")
    assert out.returncode == 0
    for name in workloads.names():
        assert name in out.stdout


@pytest.mark.tf
def test_end_to_end_run_of_the_seed000_pair(tmp_path):
    out = cli(
        "run",
        "numpy_gd",
        "workloads.tf1_gd",
        "--steps",
        "300",
        "--phases",
        "timed",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    latest = tmp_path / "latest"
    assert latest.is_symlink()
    run_dir = latest.resolve()
    assert f"report: {tmp_path / run_dir.name / 'report.html'}" in out.stdout
    doc = json.loads((run_dir / "summary.json").read_text())
    summary.validate(doc)
    names = [w["name"] for w in doc["workloads"]]
    assert names == ["numpy_gd", "tf1_gd"]
    np_w, tf_w = doc["workloads"]
    assert np_w["step_time"]["steps"] == 300 and tf_w["step_time"]["steps"] == 300
    # The seed's finding, as a ratio in one run: the TF1 session step is many times slower.
    assert tf_w["step_time"]["median_us"] > 3 * np_w["step_time"]["median_us"]
    for w in doc["workloads"]:
        traj = [p["value"] for p in w["loss"]["trajectory"]]
        assert traj[-1] < traj[0]
    report = (run_dir / "report.html").read_text()
    assert "numpy_gd" in report and "tf1_gd" in report
    assert "numpy_gd" in out.stdout and "tf1_gd" in out.stdout
    assert not list(tmp_path.glob("*.partial"))


def test_unknown_workload_exits_2_and_lists_the_names(tmp_path):
    out = cli("run", "no_such_loop", "--out", str(tmp_path))
    assert out.returncode == 2
    assert "unknown workload 'no_such_loop'" in out.stderr
    assert "numpy_gd" in out.stderr and "tf1_gd" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "argument --steps: must be a positive integer, got '0'"),
        (["--steps", "-5"], "argument --steps: must be a positive integer, got '-5'"),
        (["--n", "0"], "argument --n: must be a positive integer, got '0'"),
        (["--steps", "ten"], "argument --steps: must be a positive integer, got 'ten'"),
        (["--timeout", "0"], "argument --timeout: must be a positive number, got '0'"),
        (["--phases", "timed,bogus"], "unknown phase 'bogus'"),
    ],
)
def test_bad_numbers_exit_2_with_one_line(tmp_path, args, message):
    out = cli("run", "numpy_gd", "--out", str(tmp_path), *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert not any(tmp_path.iterdir())


def test_unwritable_output_folder_exits_3_and_leaves_nothing(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = cli("run", "numpy_gd", "--steps", "10", "--out", str(blocker / "runs"))
    assert out.returncode == 3
    assert out.stderr.startswith("error: cannot write the output folder")
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_report_rerenders_from_summary_and_rejects_a_non_run(tmp_path):
    out = cli("run", "numpy_gd", "--steps", "50", "--out", str(tmp_path), "--no-progress")
    assert out.returncode == 0, out.stderr
    run_dir = (tmp_path / "latest").resolve()
    (run_dir / "report.html").unlink()
    # Every output it writes comes back, TensorBoard's event files and the Chrome trace too.
    (events,) = (run_dir / "tensorboard").rglob("events.out.tfevents.*")
    scalars = tensorboard.read(events)
    events.unlink()
    (run_dir / "workloads" / "numpy_gd" / chrome_trace.FILE_NAME).unlink()
    again = cli("report", str(run_dir))
    assert again.returncode == 0
    assert "numpy_gd" in (run_dir / "report.html").read_text()
    (events,) = (run_dir / "tensorboard").rglob("events.out.tfevents.*")
    assert [(x["tag"], x["step"], x["value"]) for x in tensorboard.read(events)] == [
        (x["tag"], x["step"], x["value"]) for x in scalars
    ]
    assert (run_dir / "workloads" / "numpy_gd" / chrome_trace.FILE_NAME).is_file()
    missing = cli("report", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert "summary.json does not exist" in missing.stderr


def test_seed_full_steps_flag_is_documented_in_help():
    out = cli("run", "--help")
    assert "--full" in out.stdout and "1e5" in out.stdout
    assert Path(REPO / "Makefile").read_text().count("FULL") >= 2


def test_capture_without_tensorflow_installed_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from profiler import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorflow" else real(name, *a),
    )
    status = cli.main(["capture", "grpc://127.0.0.1:1", "--out", str(tmp_path / "runs")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: capture: ") and "TensorFlow is not installed" in lines[0]
    assert not (tmp_path / "runs").exists()

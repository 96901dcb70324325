"""``python -m profiler compare`` on two recorded summaries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.analysis import compare, regression
from profiler.model import CATEGORIES
from tests.conftest import python_env
from tests.recorded import GOLDEN_SUMMARY
from tests.test_cli import cli


def _golden(run_id: str) -> dict:
    """The golden summary as run ``run_id``, without its training-efficiency section (which
    compare does not read, and which is most of the schema check's time)."""
    doc = json.loads(GOLDEN_SUMMARY.read_text())
    doc["run"]["id"] = run_id
    doc["efficiency"] = None
    return doc


def _entry(name: str, step: float, **typical: float) -> dict:
    """The golden summary's numpy_gd entry, renamed, with this attribution and no step spread
    (``compare`` reads summaries as ``report`` does: they must match the schema)."""
    cats = dict.fromkeys(CATEGORIES, 0.0)
    cats.update(typical)
    assert sum(cats.values()) == pytest.approx(step)
    (entry,) = [w for w in _golden("")["workloads"] if w["name"] == "numpy_gd"]
    entry.update(name=name, slug=name, label=name, status="ok", step_time=None)
    entry["work"]["flops_per_step"] = 12_000
    entry["attribution"].update(reference_us=step, typical_us=cats, method="test")
    return entry


def _run(root: Path, run_id: str, *entries: dict) -> Path:
    d = root / run_id
    d.mkdir(parents=True)
    doc = _golden(run_id)
    doc["workloads"] = list(entries)
    (d / "summary.json").write_text(json.dumps(doc))
    return d


@pytest.fixture()
def runs(tmp_path):
    a = _run(
        tmp_path,
        "20260101-000000",
        _entry("tf1_gd", 190.0, compute=30, dispatch=60, feed_fetch=64, python=30, other=6),
        _entry("numpy_gd", 10.0, compute=2, dispatch=6, python=2),
    )
    b = _run(
        tmp_path,
        "20260102-000000",
        _entry("tf1_gd", 95.0, compute=30, dispatch=40, feed_fetch=10, python=15),
    )
    return a, b


def test_two_workloads_of_one_run(runs):
    a, _ = runs
    doc = compare.compare("tf1_gd", "numpy_gd", a)
    (c,) = doc["comparisons"]
    assert c["ratio"] == pytest.approx(19.0)
    assert c["difference_us"]["feed_fetch"] == 64
    assert c["order"][:2] == ["feed_fetch", "dispatch"]
    assert c["sentence"].startswith(
        "tf1_gd is 19.0× slower than numpy_gd (190.0 vs 10.0 µs per step): +64.0 µs feed/fetch, "
        "+54.0 µs dispatch, +28.0 µs compute, +28.0 µs Python, +6.0 µs other"
    )


def test_two_runs_compare_every_shared_workload(runs):
    a, b = runs
    doc = compare.compare(str(a), str(b), a)
    (c,) = doc["comparisons"]
    assert (c["a"]["run"], c["b"]["run"]) == ("20260101-000000", "20260102-000000")
    assert c["sentence"].startswith("tf1_gd is 2.0× slower than tf1_gd")
    same = compare.compare(f"{b}:tf1_gd", f"{a}:tf1_gd", a)["comparisons"][0]
    assert same["sentence"].startswith("tf1_gd is 2.0× faster than tf1_gd")


def test_cli_prints_the_table_and_writes_json_outside_the_runs(runs, tmp_path):
    a, b = runs
    target = tmp_path / "out" / "cmp.json"
    target.parent.mkdir()
    out = cli("compare", "tf1_gd", "numpy_gd", "--run", str(a), "--json", str(target))
    assert out.returncode == 0, out.stderr
    assert "tf1_gd is 19.0× slower than numpy_gd" in out.stdout
    assert "feed/fetch" in out.stdout and "+64.0" in out.stdout
    assert json.loads(target.read_text()) == compare.compare("tf1_gd", "numpy_gd", a)
    assert sorted(p.name for p in a.iterdir()) == ["summary.json"]


def test_cli_refuses_json_inside_a_run_and_unknown_names(runs):
    a, b = runs
    inside = cli("compare", str(a), str(b), "--json", str(a / "cmp.json"))
    assert inside.returncode == 2
    assert "is inside the run" in inside.stderr
    assert not (a / "cmp.json").exists()
    unknown = cli("compare", "tf1_gd", "nope", "--run", str(a))
    assert unknown.returncode == 2
    assert "no workload 'nope'" in unknown.stderr and "numpy_gd" in unknown.stderr
    missing = cli("compare", "tf1_gd", "numpy_gd", "--run", str(a.parent / "nowhere"))
    assert missing.returncode == 2 and "summary.json does not exist" in missing.stderr


# --- the regression gate (compare A B --fail-above PCT) -------------------------------------


def _golden_run(root: Path, run_id: str, name: str, factor: float, spread: float, units: int):
    """A run folder holding the golden summary, its workload ``name`` with every step time
    scaled by ``factor``, p10 and p90 at ``1 ± spread`` times its typical step and ``units``
    timed units (the other workloads as recorded)."""
    doc = _golden(run_id)
    (w,) = [w for w in doc["workloads"] if w["name"] == name]
    att, st = w["attribution"], w["step_time"]
    att["reference_us"] *= factor
    att["typical_us"] = {c: v if v is None else v * factor for c, v in att["typical_us"].items()}
    for key in ("median_us", "mean_us"):
        st[key] *= factor
    st["p10_us"], st["p90_us"] = (
        att["reference_us"] * (1 - spread),
        att["reference_us"] * (1 + spread),
    )
    st["steps"] = units * w["work"]["units_per_step"]
    d = root / run_id
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(doc))
    return d


def _gate_line(stdout: str, name: str) -> str:
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith(f"  {name}: A ")]
    return line


def test_gate_fails_on_a_clear_regression_of_one_workload(tmp_path):
    a = _golden_run(tmp_path, "20260101-000000", "tf1_gd", 1.0, 0.02, 250)
    b = _golden_run(tmp_path, "20260102-000000", "tf1_gd", 1.3, 0.02, 250)
    out = cli("compare", str(a), str(b), "--fail-above", "10")
    assert out.returncode == 4, out.stderr
    line = _gate_line(out.stdout, "tf1_gd")
    assert "A 389.3 µs, B 506.1 µs, +30.0% (95% interval +29." in line
    assert line.endswith("regressed (more than 10% slower)")
    # The other eleven workloads are A's own: within, and still one line each.
    assert _gate_line(out.stdout, "numpy_gd").endswith("within 10%")
    assert out.stdout.count(" µs, B ") == 12
    assert out.stdout.rstrip().endswith("gate: failed (tf1_gd regressed)")


def test_gate_calls_a_regression_inside_the_noise_inconclusive(tmp_path):
    a = _golden_run(tmp_path, "20260101-000000", "tf1_gd", 1.0, 0.9, 20)
    b = _golden_run(tmp_path, "20260102-000000", "tf1_gd", 1.3, 0.9, 20)
    out = cli("compare", f"{a}:tf1_gd", f"{b}:tf1_gd", "--fail-above", "10")
    assert out.returncode == 0, out.stderr
    line = _gate_line(out.stdout, "tf1_gd")
    assert "+30.0% (95% interval -" in line
    assert line.endswith("inconclusive (above 10%, but its interval reaches below)")
    assert out.stdout.rstrip().endswith("gate: passed")


def test_gate_passes_a_run_against_itself(tmp_path):
    a = _golden_run(tmp_path, "20260101-000000", "tf1_gd", 1.0, 0.02, 250)
    out = cli("compare", str(a), str(a), "--fail-above", "0")
    assert out.returncode == 0, out.stderr
    assert _gate_line(out.stdout, "tf1_gd").endswith(
        "+0.0% (95% interval -0.4% to +0.4%): within 0%"
    )
    assert out.stdout.rstrip().endswith("gate: passed")


def test_json_without_a_file_prints_the_comparison_and_the_gate_alone(tmp_path):
    a = _golden_run(tmp_path, "20260101-000000", "tf1_gd", 1.0, 0.02, 250)
    b = _golden_run(tmp_path, "20260102-000000", "tf1_gd", 1.3, 0.02, 250)
    out = cli("compare", f"{a}:tf1_gd", f"{b}:tf1_gd", "--fail-above", "10", "--json")
    assert out.returncode == 4, out.stderr
    doc = json.loads(out.stdout)  # nothing else on stdout
    (c,) = doc["comparisons"]
    assert c["a"]["step_us"] == pytest.approx(389.298)
    assert c["b"]["step_us"] == pytest.approx(389.298 * 1.3)
    g = doc["gate"]
    assert (g["fail_above_pct"], g["confidence"], g["failed"]) == (10.0, 0.95, True)
    (w,) = g["workloads"]
    assert w["workload"] == "tf1_gd" and w["verdict"] == "regressed"
    assert w["change_pct"] == pytest.approx(30.0)
    assert 10 < w["low_pct"] < 30 < w["high_pct"] < 31
    assert "gate: failed (tf1_gd regressed)" in out.stderr  # the text goes to stderr
    assert sorted(p.name for p in a.iterdir()) == ["summary.json"]


@pytest.mark.parametrize("pct", ["-5", "ten", "nan", "inf"])
def test_a_bad_percentage_is_a_one_line_usage_error(runs, pct):
    a, b = runs
    out = cli("compare", str(a), str(b), f"--fail-above={pct}")
    assert out.returncode == 2
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: argument --fail-above: must be a non-negative number")


def test_compare_imports_no_tensorflow(runs):
    a, b = runs
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "profiler", "compare", str(a), str(b)],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in out.stderr.splitlines() if "|" in ln}
    assert "profiler.analysis.regression" in imported  # the probe sees the modules compare uses
    assert "tensorflow" not in imported


def test_standard_error_is_yuens_with_the_winsorized_sd_bounded_by_p10_p90():
    entry = {
        "attribution": {"reference_us": 100.0},
        "step_time": {"steps": 200, "p10_us": 90.0, "p90_us": 110.0},
        "work": {"units_per_step": 2},
    }
    e = regression.estimate(entry)
    # 100 units, 10 trimmed each side: h = 80; sqrt(n (p90 - p10)² / (4 h (h - 1))).
    assert (e.units, e.df) == (100, 79.0)
    assert e.se_us == pytest.approx((100 * 20**2 / (4 * 80 * 79)) ** 0.5)
    same = regression.change("w", e, e, 0.0)
    assert (same.change_pct, same.verdict) == (0.0, regression.WITHIN)
    # Symmetric on the log of the ratio: (1 + low) (1 + high) = 1.
    assert (1 + same.low_pct / 100) * (1 + same.high_pct / 100) == pytest.approx(1.0)
    assert 3 < same.high_pct < 4  # ±1.96 × √2 × 1.26% of the step
    faster = regression.change("w", e, regression.StepEstimate(70.0, 0.7, 79.0, 100), 10.0)
    assert faster.verdict == regression.FASTER and faster.high_pct < 0


def test_without_step_spread_a_change_above_pct_is_inconclusive(runs):
    a, b = runs  # the synthetic entries carry no step_time
    g = compare.compare(f"{b}:tf1_gd", f"{a}:tf1_gd", a, fail_above_pct=10)["gate"]
    (w,) = g["workloads"]
    assert w["change_pct"] == pytest.approx(100.0)
    assert (w["low_pct"], w["verdict"], g["failed"]) == (None, "inconclusive", False)


# --- corrupt summaries: compare reads them as report does ------------------------------------


def _corrupt(kind: str, run_id: str) -> str:
    if kind == "nested":  # json.loads raises RecursionError, not a ValueError
        return "[" * 100_000 + "]" * 100_000
    doc = _golden(run_id)
    if kind == "wrong type":
        doc["workloads"][0]["attribution"]["typical_us"] = "fast"
        return json.dumps(doc)
    if kind == "missing key":
        del doc["workloads"][1]["slug"]
        return json.dumps(doc)
    return json.dumps(doc)[:5000]  # truncated


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("nested", "not a valid summary: nested deeper than 64 levels"),
        ("wrong type", "workloads/0/attribution: "),
        ("missing key", "workloads/1: 'slug' is a required property"),
        ("truncated", "not a valid summary: not JSON"),
    ],
)
def test_compare_refuses_a_corrupt_summary_with_reports_one_line(runs, kind, reason):
    a, _ = runs
    b = a.parent / "corrupt"
    b.mkdir()
    (b / "summary.json").write_text(_corrupt(kind, "corrupt"))
    compared = cli("compare", str(a), str(b), "--fail-above", "5")
    reported = cli("report", str(b))
    for out in (compared, reported):
        assert out.returncode == 2 and out.stdout == ""
        (line,) = out.stderr.splitlines()  # one line, no traceback
        assert line.startswith(f"error: {b / 'summary.json'}: ") and reason in line, line
    # The same check, so the same words.
    assert compared.stderr == reported.stderr
    assert sorted(p.name for p in b.iterdir()) == ["summary.json"]

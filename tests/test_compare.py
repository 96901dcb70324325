"""``python -m profiler compare`` on two recorded summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler.analysis import compare
from profiler.model import CATEGORIES
from tests.test_cli import cli


def _entry(name: str, step: float, **typical: float) -> dict:
    cats = dict.fromkeys(CATEGORIES, 0.0)
    cats.update(typical)
    assert sum(cats.values()) == pytest.approx(step)
    return {
        "name": name,
        "slug": name,
        "label": name,
        "status": "ok",
        "work": {"flops_per_step": 12_000},
        "attribution": {"reference_us": step, "typical_us": cats, "method": "test"},
    }


def _run(root: Path, run_id: str, *entries: dict) -> Path:
    d = root / run_id
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"run": {"id": run_id}, "workloads": list(entries)}))
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

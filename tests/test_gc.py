"""The cyclic GC's pauses: their overlap with steps by hand, the attribution's ``python.gc``,
the ``garbage_collection`` finding, and profiled scripts with and without cyclic garbage."""

from __future__ import annotations

import gc as pygc
import json
from pathlib import Path

import pytest

from profiler.analysis import attribution, gc
from profiler.capture.gc_pauses import GcRecorder
from profiler.diagnoses import gc as gc_rules
from profiler.model import PhaseRecord, Segment, Window, WorkDecl, WorkloadTrace
from profiler.model.gc import GcPauses
from tests.test_attribution import _sampled
from tests.test_rules import NP_STEP
from tests.test_script_run import cli, only_run

WORK = WorkDecl(1000, 1, 1, 15_000, 120_000)
T0 = 1_000_000


def _pauses(rows: list[tuple[int, int, int, int]], until: int | None = None) -> GcPauses:
    return GcPauses(
        start_ns=tuple(r[0] for r in rows),
        end_ns=tuple(r[1] for r in rows),
        generation=tuple(r[2] for r in rows),
        collected=tuple(r[3] for r in rows),
        count=len(rows),
        total_ns=sum(r[1] - r[0] for r in rows),
        complete_until_ns=until,
    )


def _trace(durations: list[int], pauses: GcPauses, *phases: PhaseRecord) -> WorkloadTrace:
    bounds = [T0]
    for d in durations:
        bounds.append(bounds[-1] + d)
    warm = Window("warmup", (Segment(0, (0, 1000)),))
    return WorkloadTrace(
        workload="w",
        params={},
        work=WORK,
        build_ns=0,
        warmup=warm,
        phases=(
            PhaseRecord("timed", "ok", window=Window("timed", (Segment(3, tuple(bounds)),))),
            *phases,
        ),
        script={"path": "x.py", "gc": pauses.to_json()},
    )


def test_pauses_overlap_steps_by_hand():
    pauses = _pauses([(900, 1100, 0, 5), (1500, 1600, 2, 7), (2500, 2600, 1, 9)])
    s = gc.in_steps(pauses, [(0, 1000), (1000, 2000)])
    assert s.gc_ns == (100, 200)  # the first pause is split across the boundary
    assert s.by_generation_ns == {0: 200, 1: 0, 2: 100}
    # A collection counts in the step it started in; the one after the window not at all.
    assert s.collections == {0: 1, 1: 0, 2: 1}
    assert s.freed == 12
    assert s.share == 300 / 2000
    assert s.generation_share(2) == pytest.approx(1 / 3)
    # Pauses missing before the window's end: nothing is said.
    assert gc.in_steps(_pauses([], until=1500), [(0, 1000), (1000, 2000)]) is None


def _each_step(share_ns: int, n: int = 10, step: int = 2000, gen: int = 0) -> GcPauses:
    return _pauses(
        [(T0 + i * step + 100, T0 + i * step + 100 + share_ns, gen, 50) for i in range(n)]
    )


def test_unexplained_gc_time_moves_from_other_to_python_gc():
    att = attribution.attribute(_trace([2000] * 10, _each_step(500)))
    assert att.typical["python"] == 500 and att.typical["other"] == 1500
    assert att.parts["python.gc"] == 500
    for row, u in zip(att.steps, [2000] * 10, strict=True):
        assert sum(row) == u


def test_sampled_python_holds_the_gc_and_an_excess_is_capped():
    rec = _sampled([(NP_STEP, 30)])  # all samples Python: the whole step
    att = attribution.attribute(_trace([2000] * 10, _each_step(500), rec))
    assert att.typical["python"] == 2000 and att.parts["python.gc"] == 500
    # More GC time than the step (overlapping pauses no run records): capped at the step.
    att = attribution.attribute(_trace([2000] * 10, _each_step(2500, step=2000)))
    assert att.parts["python.gc"] == 2000
    assert any("capped" in n for n in att.notes)


def _facts(trace: WorkloadTrace) -> dict:
    f: dict = {"label": "w"}
    gc_rules.gc_facts(f, trace)
    return f


def test_the_finding_fires_at_a_fifth_of_the_step_with_the_fix_its_figures_support():
    (rule,) = gc_rules.RULES
    f = _facts(_trace([2000] * 10, _each_step(400)))  # 20%: fires
    assert rule.when(f)
    assert "raise the thresholds" in f["gc_fix"] and "reference cycles" not in f["gc_fix"]
    assert not rule.when(_facts(_trace([2000] * 10, _each_step(380))))  # 19%
    full = _facts(_trace([2000] * 10, _each_step(1000, gen=2)))
    assert "gc.freeze()" in full["gc_fix"] and full["gc_full_pct"] == 100
    assert "raise the thresholds" not in full["gc_fix"]
    msg = rule.message.format(**full)
    assert "50% of the timed steps" in msg and "100% of it in full" in msg


def test_a_rare_collection_in_the_timed_window_is_weighed_across_the_run():
    (rule,) = gc_rules.RULES
    # One collection of 10 µs in a 20 µs timed window (50% of it), and a later phase's
    # window of 1,000 steps with none: a k-fold loop's collection once a fold, not its steps.
    rare = _pauses([(T0 + 2_100, T0 + 12_100, 2, 50)])
    later = [T0 + 100_000 + 2000 * i for i in range(1001)]
    lines = PhaseRecord("lines", "ok", window=Window("lines", (Segment(500, tuple(later)),)))
    f = _facts(_trace([2000] * 10, rare, lines))
    assert f["gc_share"] == pytest.approx(0.5) and f["gc_window_collections"] == 1
    assert f["gc_run_share"] < 0.01 and not rule.when(f)
    # Without another window the timed one is all the run said: it fires.
    assert rule.when(_facts(_trace([2000] * 10, rare)))


def test_freed_objects_a_step_point_at_reference_cycles():
    pauses = _pauses([(T0 + i * 2000 + 100, T0 + i * 2000 + 900, 0, 5000) for i in range(10)])
    f = _facts(_trace([2000] * 10, pauses))
    assert "reference cycles" in f["gc_fix"] and "5,000 objects a step" in f["gc_fix"]
    assert "gc.freeze()" not in f["gc_fix"]


def test_the_recorder_keeps_real_collections_and_its_bound():
    rec = GcRecorder(limit=2)
    rec.start()
    try:
        for _ in range(3):
            pygc.collect(0)
    finally:
        rec.stop()
    r = rec.record()
    assert r.count == 3 and len(r.start_ns) == 2 and r.complete_until_ns is not None
    assert all(b >= a for a, b in zip(r.start_ns, r.end_ns, strict=True))
    assert GcPauses.from_json(json.loads(json.dumps(r.to_json()))) == r


CYCLES = """\
class Node:
    def __init__(self, parent=None):
        self.parent = parent
        self.children = []
        self.back = lambda: self  # a closure referring to its own object: a cycle
        if parent is not None:
            parent.children.append(self)

total = 0
for step in range({steps}):
    root = Node()
    for i in range({nodes}):
        Node(root)
    total += len(root.children)
print(total)
"""

NUMPY_LOOP = """\
import numpy as np
x = np.random.default_rng(0).standard_normal((400, 50))
w = np.zeros(50)
for step in range({steps}):
    g = x.T @ (x @ w - 1.0) / 400
    w -= 0.01 * g
print(float(w.sum()))
"""


def _profile(tmp_path: Path, text: str) -> dict:
    """The summary of ``text`` profiled with no options (the checkout's code on the path, as
    every other script test: ``tests.test_script_run.cli``), its terminal under ``_stdout``."""
    script = tmp_path / "train.py"
    script.write_text(text)
    proc = cli(tmp_path, "--no-progress", str(script), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    doc["_stdout"] = proc.stdout
    return doc


@pytest.mark.slow
def test_a_script_of_cyclic_objects_names_the_collector(tmp_path):
    doc = _profile(tmp_path, CYCLES.format(steps=40, nodes=20_000))
    (w,) = doc["workloads"]
    assert w["gc"]["share"] >= 0.2 and w["gc"]["collections_per_step"] > 1
    assert w["attribution"]["parts_us"]["python.gc"] > 0
    (finding,) = [d for d in doc["diagnoses"] if d["rule"] == "garbage_collection"]
    assert "reference cycles" in finding["fix"] and "gc.freeze()" not in finding["fix"]
    assert "the garbage collector" in doc["_stdout"]


@pytest.mark.slow
def test_a_steady_numpy_loop_has_no_collector_finding(tmp_path):
    doc = _profile(tmp_path, NUMPY_LOOP.format(steps=20_000))
    (w,) = doc["workloads"]
    assert w["gc"]["share"] < 0.05
    assert not [d for d in doc["diagnoses"] if d["rule"] == "garbage_collection"]

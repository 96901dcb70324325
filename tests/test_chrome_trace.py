"""Chrome/Perfetto trace: exact events from a hand-built trace, and a real run's file."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pytest

from profiler.model import Gap, PhaseRecord, Segment, Span, Window, WorkDecl, WorkloadTrace
from profiler.reports import chrome_trace
from tests.builders import hooks_data
from tests.tf_capture import outcome, tf_run


def _trace() -> WorkloadTrace:
    return WorkloadTrace(
        workload="w",
        params={},
        work=WorkDecl(8, 1, 4, 16, 64),
        build_ns=0,
        warmup=Window("warmup", (Segment(0, (1_000, 2_000, 4_000)),)),
        phases=(
            PhaseRecord(
                "timed",
                "ok",
                Window(
                    "timed",
                    (Segment(2, (5_000, 6_000)), Segment(3, (6_500, 8_000))),
                    gaps=(Gap(6_000, 500, "metric"),),
                ),
            ),
            PhaseRecord(
                "framework",
                "ok",
                Window("framework", (Segment(4, (9_000, 19_000)),)),
                spans=(
                    Span("step", 9_100, 9_000, "tf/python", 4),
                    Span("run_call", 9_500, 5_000, "tf/python", 4, "dispatch"),
                    Span("MatMul", 10_000, 2_000, "tf/compute/0", 4, "compute"),
                ),
            ),
            PhaseRecord(
                "hooks",
                "ok",
                Window("hooks", (Segment(5, (20_000, 30_000)),)),
                data=replace(
                    hooks_data({"outside": 4_000, "native": 6_000}, HOOK_CATEGORIES),
                    per_step={"step": (5,), "outside": (4_000,), "native": (6_000,)},
                ),
            ),
        ),
    )


HOOK_CATEGORIES = {"outside": "python", "native": "native"}


def _by_track(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    names = {
        e["tid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            out[names[e["tid"]]].append(e)
    return out


def test_events_by_hand():
    tracks = _by_track(chrome_trace.build(_trace()))
    assert list(tracks) == [
        "phase: warmup",
        "phase: timed",
        "phase: framework",
        "phase: hooks",
        "gaps",
        "tf/python",
        "tf/compute/0",
        "hooks: split",
    ]
    assert [(e["name"], e["ts"], e["dur"]) for e in tracks["phase: warmup"]] == [
        ("step 0", 0.0, 1.0),
        ("step 1", 1.0, 2.0),
    ]
    assert [(e["ts"], e["dur"]) for e in tracks["phase: timed"]] == [(4.0, 1.0), (5.5, 1.5)]
    assert tracks["phase: timed"][1]["args"] == {
        "phase": "timed",
        "step": 3,
        "samples": 32,
        "updates": 4,
        "epoch": 0,
    }
    assert [(e["name"], e["ts"], e["dur"]) for e in tracks["gaps"]] == [("metric", 5.0, 0.5)]
    assert [(e["name"], e["ts"], e["cat"]) for e in tracks["tf/python"]] == [
        ("step", 8.1, "framework"),
        ("run_call", 8.5, "dispatch"),
    ]
    assert [(e["name"], e["ts"], e["dur"]) for e in tracks["hooks: split"]] == [
        ("outside", 19.0, 4.0),
        ("native", 23.0, 6.0),
    ]


def test_written_file_is_gzipped_json(tmp_path):
    path = chrome_trace.write(tmp_path / "w" / chrome_trace.FILE_NAME, _trace())
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc["displayTimeUnit"] == "ns"
    assert next(e for e in doc["traceEvents"] if e["name"] == "process_name")["args"] == {
        "name": "w"
    }


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("name", ["tf1_gd", "tf2_function_step"])
def test_real_run_trace_has_one_event_per_step_and_ordered_tracks(name):
    o = outcome(name)
    path = tf_run().run_dir / "workloads" / o.slug / chrome_trace.FILE_NAME
    doc = json.loads(gzip.decompress(path.read_bytes()))
    trace = o.trace
    windows = [trace.warmup, *(p.window for p in trace.phases if p.window is not None)]
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert len(steps) == sum(w.n_steps for w in windows)
    tracks = _by_track(doc)
    for track, events in tracks.items():
        ts = [e["ts"] for e in events]
        assert ts == sorted(ts), track
        assert all(e["dur"] >= 0 for e in events), track
    assert {"phase: timed", "phase: framework", "phase: hooks", "tf/python", "hooks: split"} <= set(
        tracks
    )
    assert len(tracks["tf/python"]) >= trace.phase("framework").window.n_steps

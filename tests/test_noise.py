"""The same answer on a busy machine: scripts profiled with no options, quiet and beside a busy
process (``profiler.bench_noise.Busy``: one core spinning, one in random bursts).

The corpus cases (``make noise``, minutes each) assert what opens the answer (the verdict's
rule: a finding's, a measured what-if, or "within the noise" where the compute share's
interval reaches across a verdict's threshold) and the top category are the same both times.
Their truths, measured without the profiler: the TF2 quickstart's ``tf.function`` step is
87% its kernels (compute-bound, ``tests/realworld/manifest.json``; the short ``tf.function``
loop this case used before is 55% kernels and 45% per-call cost, 1,006 µs a step against
556 µs for the same steps in one call, a split the top category cannot be held to); the
numpy loop's 8-16 µs step barely grows with its data (numpy's per-call cost:
overhead-bound); the tf.data pipeline's Python map waits for each batch (input-bound,
``tests/realworld/manifest.json``); the TF1 course script sits near the compute-bound
threshold (it gave compute-bound quiet and overhead-bound under load before its share had
an interval).

The fast test: a steady loop run beside the busy process gets no trend finding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler import bench_noise
from profiler.bench_noise import Busy
from tests.test_script_run import DATA, cli, only_run, write

REALWORLD = DATA.parent / "realworld"

# 120,000 steps (~1.6 s quiet): beside the busy process and a busy test suite, 40,000 were all
# watched to find the loop once (one step measured).
STEADY = """
import numpy as np

w = np.zeros(64)
x = np.random.default_rng(0).normal(size=(64, 64))
for step in range(120_000):
    w = 0.5 * np.tanh(x @ w + 1.0)
print(float(w[0]))
"""
# The same loop keeping every step's value and summing them all: a step grows with the run.
GROWING = """
import numpy as np

w = np.zeros(64)
x = np.random.default_rng(0).normal(size=(64, 64))
history = []
for step in range(20_000):
    w = 0.5 * np.tanh(x @ w + 1.0)
    history.append(float(w[0]))
    total = sum(history)
print(total)
"""


def _run(tmp_path: Path, body: str) -> dict:
    tmp_path.mkdir()
    script = write(tmp_path, "loop.py", body)
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads((only_run(tmp_path) / "summary.json").read_text())


def _rules(tmp_path: Path, body: str) -> dict[str, dict]:
    return {d["rule"]: d for d in _run(tmp_path, body)["diagnoses"]}


@pytest.mark.slow
def test_a_steady_loop_beside_a_busy_process_gets_no_trend_finding(tmp_path: Path) -> None:
    import os

    with Busy():
        doc = _run(tmp_path / "steady", STEADY)
    found = {d["rule"]: d for d in doc["diagnoses"]}
    assert "steps_slow_down" not in found, found.get("steps_slow_down")
    # The busy process's spinning core is the other processes' load the step sentence quotes.
    dist = doc["workloads"][0]["distribution"]
    assert dist["cores"] == os.cpu_count() and dist["others_cores"] >= 0.8, dist
    # ... said with the step's time, slow steps or not.
    from profiler.reports import focus_view

    sentence = focus_view._sentence(doc["workloads"][0])
    assert f"other processes kept {dist['others_cores']:.1f} of this machine's" in sentence


@pytest.mark.noise
@pytest.mark.slow
def test_the_trend_rule_fires_where_steps_do_grow(tmp_path: Path) -> None:
    # The rule the test above keeps silent fires here. Beside the other test worker its
    # widened interval reached zero in both clean-clone runs of make test: make noise only.
    grows = _rules(tmp_path / "growing", GROWING)
    assert "steps_slow_down" in grows, sorted(grows)


#: (script, a TensorFlow script): a compute-bound, an overhead-bound, an input-bound case, a
#: Keras fit, and the TF1 script near the compute-bound threshold.
CASES = [
    pytest.param(REALWORLD / "tf_quickstart_advanced.py", id="compute_bound", marks=pytest.mark.tf),
    pytest.param(DATA / "short" / "numpy_gd.py", id="overhead_bound"),
    pytest.param(REALWORLD / "tf_data_input_bound.py", id="input_bound", marks=pytest.mark.tf),
    pytest.param(REALWORLD / "keras_quickstart_beginner.py", id="keras_fit", marks=pytest.mark.tf),
    pytest.param(DATA / "short" / "tf1_logreg.py", id="near_threshold", marks=pytest.mark.tf),
]


@pytest.mark.noise
@pytest.mark.slow
@pytest.mark.parametrize("script", CASES)
def test_the_same_verdict_and_top_category_quiet_and_beside_a_busy_process(script: Path) -> None:
    quiet = bench_noise.profile(script)
    with Busy():
        busy = bench_noise.profile(script)
    assert not quiet.error and not busy.error, (quiet.error, busy.error)
    assert quiet.rule and quiet.top, quiet
    said = f"quiet: {quiet.verdict} [{quiet.drift}]\nbusy:  {busy.verdict} [{busy.drift}]"
    assert quiet.rule == busy.rule, said
    assert quiet.top == busy.top, (quiet.shares, busy.shares, said)

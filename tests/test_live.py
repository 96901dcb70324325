"""In code: ``with profiler.profile()`` around a loop in the user's own process, and
``profiler.keras.ProfileCallback`` in a ``fit``. Each runs in a fresh Python process, as a user's
program would, and the run folder it writes is checked with the summary object it returns."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiler.reports import summary
from tests.conftest import python_env


def _python(tmp_path: Path, body: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _the_run(tmp_path: Path, status: str = "ok") -> tuple[Path, dict]:
    runs = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(runs) == 1, runs
    doc = json.loads((runs[0] / "summary.json").read_text())
    summary.validate(doc)
    assert doc["run"]["status"] == status
    (w,) = doc["workloads"]
    return runs[0], w


NUMPY_BLOCK = """
import json
import numpy as np
import profiler

w = np.zeros((64, 1))
x = np.random.rand(512, 64)
with profiler.profile(out="runs", max_steps=4000) as p:
    for i in range(1_000_000):
        with profiler.step(samples=512):
            grad = x.T @ (x @ w - 1.0) / len(x)
            w -= 0.01 * grad
after = 0
for i in range(10):  # the program runs on after the block
    after += 1
s = p.summary
print(json.dumps({
    "status": s.status, "steps": s.steps, "step_ns": s.step_ns, "categories": s.categories,
    "not_measured": s.not_measured, "text": str(s), "report": str(p.report_path),
    "after": after,
}))
"""


@pytest.mark.slow
def test_a_with_block_around_a_numpy_loop_writes_the_run_and_gives_the_attribution(tmp_path):
    out = _python(tmp_path, NUMPY_BLOCK)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    run, w = _the_run(tmp_path)
    # max_steps ended the block there; the program went on.
    assert got["status"] == "ok" and got["steps"] == 4000 and got["after"] == 10
    assert w["script"]["steps"] == 4000 and w["script"]["ended"] == "max_steps"
    statuses = {p["name"]: p["status"] for p in w["phases"]}
    assert statuses["timed"] == "ok" and statuses["sampled"] == "ok"
    assert "lines" not in statuses  # needs code registered before it runs: not a block's
    # The object is the summary's attribution: categories sum to the typical step.
    assert sum(got["categories"].values()) == got["step_ns"]
    assert got["step_ns"] / 1e3 == pytest.approx(w["attribution"]["reference_us"], abs=0.001)
    # numpy's kernels need --native samples: sampled with it, every category is measured
    # (how the few samples of a 0.1 s block split is not asserted).
    assert got["not_measured"] == {} and set(got["categories"]) >= {"compute", "python"}
    assert got["categories"]["compute"] + got["categories"]["dispatch"] > 0
    assert (tmp_path / got["report"]).resolve() == (run / "report.html").resolve()
    assert "µs per step" in got["text"]
    assert (tmp_path / "runs" / "latest").resolve() == run.resolve()


RAISES = """
import numpy as np
import profiler

w = np.zeros((8, 1))
try:
    with profiler.profile(out="runs") as p:
        for i in range(100_000):
            with profiler.step():
                w += 1.0
            if i == 2_000:
                raise ValueError("bad batch")
except ValueError as exc:
    print("raised:", exc, p.summary.status, p.summary.steps)
"""


@pytest.mark.slow
def test_a_block_that_raises_still_writes_what_was_measured_and_the_error_reaches_the_caller(
    tmp_path,
):
    out = _python(tmp_path, RAISES)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "raised: bad batch failed 2001" in out.stdout
    _run, w = _the_run(tmp_path, status="failed")
    assert w["script"]["ended"] == "raised"
    assert "the block raised ValueError after 2001 steps" in w["error"]
    assert {p["name"]: p["status"] for p in w["phases"]}["timed"] == "ok"


TF_BLOCK = """
import json
import numpy as np
import tensorflow as tf
import profiler

x = tf.constant(np.random.rand(256, 32), tf.float32)
v = tf.Variable(tf.zeros((32, 1)))

@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ v - 1.0) ** 2)
    v.assign_sub(0.01 * tape.gradient(loss, v))
    return loss

call_before = type(step).__call__
with profiler.profile(out="runs", max_steps=600) as p:
    for i in range(100_000):
        step()  # no mark: each tf.function call is a step
print(json.dumps({
    "restored": type(step).__call__ is call_before,
    "steps": p.summary.steps,
    "kinds": sorted(p.summary.categories),
}))
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_with_block_finds_tf_function_steps_and_leaves_tensorflow_unpatched(tmp_path):
    out = _python(tmp_path, TF_BLOCK)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    _run, w = _the_run(tmp_path)
    assert got["restored"] is True
    assert got["steps"] == 600
    assert w["script"]["detection"]["framework"] == "tf2"
    statuses = {p["name"]: p["status"] for p in w["phases"]}
    assert statuses == {"timed": "ok", "sampled": "ok", "framework": "ok", "hooks": "ok"}
    # The framework capture measured the kernels: compute is a measured category.
    assert "compute" in got["kinds"]


KERAS_FIT = """
import json
import numpy as np
import keras
from profiler.keras import ProfileCallback

x = np.random.rand(4096, 16).astype("float32")
y = np.random.rand(4096, 1).astype("float32")
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", "mse")
cb = ProfileCallback(out="runs", skip_batches=10, batches=300)
history = model.fit(x, y, epochs=4, batch_size=32, callbacks=[cb], verbose=0)
fit_again = model.fit(x, y, epochs=1, batch_size=32, verbose=0)  # unprofiled, unchanged
print(json.dumps({
    "steps": cb.summary.steps, "status": cb.summary.status, "epochs": len(history.history["loss"]),
    "report": str(cb.report_path), "categories": cb.summary.categories,
    "step_ns": cb.summary.step_ns,
}))
"""


@pytest.mark.tf
@pytest.mark.slow
def test_the_keras_callback_profiles_its_window_of_batches_and_writes_the_run(tmp_path):
    out = _python(tmp_path, KERAS_FIT)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    run, w = _the_run(tmp_path)
    # 4 epochs of 128 batches ran; the window is the 300 after the first 10.
    assert got["epochs"] == 4
    assert got["steps"] == 300 == w["script"]["steps"]
    assert w["script"]["detection"]["framework"] == "keras"
    statuses = {p["name"]: p["status"] for p in w["phases"]}
    assert statuses == {"timed": "ok", "sampled": "ok", "framework": "ok", "hooks": "ok"}
    assert w["script"]["fit"]["steps_per_epoch"] == 128
    assert sum(got["categories"].values()) == got["step_ns"]
    assert (tmp_path / got["report"]).resolve() == (run / "report.html").resolve()

"""Automatic steps: with no framework step and no mark, the script's loop whose iterations are
the training steps is found and every phase runs on it (an eager loop, a loop over a tf.data
iterator, a predict loop, a numpy loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_script_run import cli, only_run, workload, write


def _auto(tmp_path: Path, name: str, body: str, *args: str) -> dict:
    script = write(tmp_path, name, body)
    out = cli(tmp_path, *args, str(script))
    assert out.returncode == 0, out.stderr[-3000:]
    w = workload(only_run(tmp_path))
    assert w["script"]["detection"]["source"] == "auto_loop", w["script"]["detection"]
    return w


def _line(body: str, text: str) -> int:
    import textwrap

    lines = textwrap.dedent(body).splitlines()
    return next(i for i, ln in enumerate(lines, 1) if text in ln)


NUMPY = """
import numpy as np

data = [np.random.rand(64, 32) for _ in range(100)]
w = np.zeros((32, 1))
for epoch in range(5000):
    for x in data:
        grad = x.T @ (x @ w - 1.0) / len(x)
        w -= 0.01 * grad
print(float(w.sum()))
"""


def test_a_numpy_loop_is_found_and_every_numpy_phase_runs_on_it(tmp_path: Path):
    w = _auto(tmp_path, "np_loop.py", NUMPY)
    auto = w["script"]["auto_step"]
    assert auto["chosen_line"] == _line(NUMPY, "for x in data:")
    assert "line" in auto["why"]
    statuses = {p["name"]: p["status"] for p in w["phases"]}
    assert statuses == {
        "timed": "ok",
        "sampled": "ok",
        "framework": "skipped",  # no TensorFlow
        "hooks": "skipped",
        "lines": "ok",
        "whatif": "skipped",  # every what-if is a TensorFlow fix
    }
    assert w["script"]["steps"] > 1000


EAGER = """
import numpy as np
import tensorflow as tf

x = tf.constant(np.random.rand(256, 16), tf.float32)
y = tf.constant(np.random.rand(256, 1), tf.float32)
w = tf.Variable(tf.zeros((16, 1)))
opt = tf.keras.optimizers.SGD(0.01)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
for epoch in range(150):
    for xb, yb in ds:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((xb @ w - yb) ** 2)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
print(float(loss))
"""


@pytest.mark.tf
def test_an_eager_loop_over_a_dataset_is_found_and_named_eager(tmp_path: Path):
    w = _auto(tmp_path, "eager_loop.py", EAGER, "--max-steps", "500")
    assert w["script"]["auto_step"]["chosen_line"] == _line(EAGER, "for xb, yb in ds:")
    assert w["script"]["detection"]["mode"] == "eager"
    # The iterator's next() is part of each step; the eager ops run in it.
    assert w["attribution"]["typical_us"]["dispatch"] > 0
    assert w["script"]["pipelines"][0]["stages"][-1]["kind"] == "batch"


PREDICT = """
import numpy as np
import keras

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
xs = np.random.rand(400, 8).astype("float32")
out = []
for i in range(400):
    out.append(model.predict(xs[i : i + 1], verbose=0))
print(len(out))
"""


@pytest.mark.tf
def test_a_predict_loop_without_training_is_found(tmp_path: Path):
    w = _auto(tmp_path, "predict_loop.py", PREDICT, "--max-steps", "60", "--phases", "timed")
    assert w["script"]["auto_step"]["chosen_line"] == _line(PREDICT, "for i in range(400):")
    calls = w["script"]["keras_calls"]["predict"]
    assert calls["calls"] >= 60 and calls["samples"] == calls["sized"]


def test_without_auto_step_the_loop_is_only_suggested(tmp_path: Path):
    script = write(tmp_path, "np_loop.py", NUMPY)
    out = cli(tmp_path, "--no-auto-step", "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-3000:]
    s = workload(only_run(tmp_path))["script"]
    line = _line(NUMPY, "for x in data:")
    assert s["detection"]["steps_detected"] is False
    assert s["auto_step"]["chosen_line"] is None and s["auto_step"]["suggested_line"] == line
    assert f"rerun with --step-line {line}" in s["message"]
    assert f"--step-line {line}" in out.stdout + out.stderr

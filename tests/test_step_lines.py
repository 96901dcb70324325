"""A line of the script's own code inside its steps that holds much of each step is named
with its line, its function and a fix that fits where it runs (``profiler.diagnoses.step_lines``).

Truth, measured without the profiler on this machine: a Keras ``fit`` whose callback calls
``model.evaluate`` on held-out rows at every batch end took 256-304 ms a batch, 7.5-10 ms
without the callback (125 and 500 batches, 2 repeats each): the callback is ~97% of a batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_script_run import cli, only_run, write

FIT = """
import numpy as np
import tensorflow as tf

x = np.random.rand(1600, 20).astype("float32")
y = (x.sum(axis=1) > 10).astype("float32")


class BatchEnd(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        {work}


model = tf.keras.Sequential(
    [tf.keras.Input((20,)), tf.keras.layers.Dense(16), tf.keras.layers.Dense(1)]
)
model.compile("adam", "mse")
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[BatchEnd()])
"""
EVALUATE = "self.last = self.model.evaluate(x[:64], y[:64], verbose=0)"
CHEAP = "self.last = float(logs['loss'])"


def _found(tmp_path: Path, work: str) -> dict[str, dict]:
    script = write(tmp_path, "fit_cb.py", FIT.replace("{work}", work))
    out = cli(tmp_path, "--phases", "timed,lines", str(script))
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    return {d["rule"]: d for d in doc["diagnoses"]}


@pytest.mark.tf
@pytest.mark.slow
def test_a_callback_evaluating_every_batch_is_named_with_its_line_and_a_per_batch_fix(
    tmp_path: Path,
) -> None:
    found = _found(tmp_path, EVALUATE)
    d = found["step_line"]
    assert f"line 11 of BatchEnd.on_train_batch_end (`{EVALUATE}`)" in d["message"]
    share = float(d["message"].split(") holds ")[1].split("%")[0])
    assert 70 <= share <= 100, d["message"]
    assert "every N batches" in d["fix"] and "validation_data" in d["fix"]


@pytest.mark.tf
@pytest.mark.slow
def test_a_callback_reading_its_logs_gets_no_finding_and_fits_own_line_is_not_one(
    tmp_path: Path,
) -> None:
    # The fit(...) line holds every step (one execution spans them all): the step, not in it.
    found = _found(tmp_path, CHEAP)
    assert "step_line" not in found, found.get("step_line")


@pytest.mark.parametrize(
    ("source", "logging"),
    [
        ("loop.set_postfix(loss=loss, acc=acc)", True),
        ("print(f'step {step}: {loss:.3f}')", True),
        ("logger.info('loss %f', loss)", True),
        ("writer.add_scalar('loss', loss, step)", True),
        ("wandb.log({'loss': loss})", True),
        ("loss = -np.log(probs[range(n), y]).mean()", False),
        ("grad = X.T @ err / len(y)", False),
    ],
)
def test_in_a_loop_the_automatic_step_found_only_logging_lines_count(
    source: str, logging: bool
) -> None:
    # The loop's body is the step's work (its arithmetic is no line to do less often); its
    # logging and progress bars are not (tqdm's set_postfix every step: 32-43% of a numpy
    # loop without the profiler, 41% of the lines window's step).
    from profiler.diagnoses import step_lines

    assert bool(step_lines.LOGGING_LINE.search(source)) is logging
    if logging:
        assert step_lines._fix("<module>", source).startswith(
            "Log, print or update the progress bar every N steps"
        )

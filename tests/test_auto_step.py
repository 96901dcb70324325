"""Automatic steps: with no framework step and no mark, the script's loop whose iterations are
the training steps is found and every phase runs on it (an eager loop, a loop over a tf.data
iterator, a predict loop, a numpy loop)."""

from __future__ import annotations

import itertools
import json
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
    w = _auto(tmp_path, "np_loop.py", NUMPY, "--max-steps", "3000")
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
        "whatif": "ok",  # the float32 blocks on its float64 arrays (numpy_float32)
    }
    assert w["script"]["steps"] > 1000


RUNS_OUT = """
import numpy as np

x = np.random.rand(64, 8)
w = np.zeros(8)
for step in range(30_000):
    w -= 0.01 * x.T @ (x @ w - 1.0) / len(x)
print(float(w.sum()))
"""


def test_the_iterations_watched_to_find_the_loop_are_counted_among_its_steps(tmp_path: Path):
    # A 20,000-step loop said it ran 12,931 steps: the 7,069 its watching took were left out.
    script_path = write(tmp_path, "runs_out.py", RUNS_OUT)
    out = cli(tmp_path, "--phases", "timed", str(script_path))
    assert out.returncode == 0, out.stderr[-3000:]
    script = workload(only_run(tmp_path))["script"]
    measured = script["steps"]
    if script["detection"]["source"] == "step_line":
        # On a busy machine the loop can end before it is chosen: the second run takes it
        # from its first iteration (--step-line), watching none.
        assert measured == 30_000 and script["message"].endswith(": 30,000 steps"), script
        return
    assert script["detection"]["source"] == "auto_loop", script["detection"]
    watched = script["auto_step"]["watched_iterations"]
    assert watched > 0 and watched + measured == 30_000, (watched, measured)
    assert script["message"] == (
        f"the script ran to its end: 30,000 steps (the first {watched:,} watched to find its "
        f"loop, {measured:,} measured)"
    )
    t = script["time"]
    assert 0 < t["watched_s"] < t["before_s"], t


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
def test_a_predict_loop_without_training_is_found_and_its_direct_call_measured(tmp_path: Path):
    w = _auto(
        tmp_path, "predict_loop.py", PREDICT, "--max-steps", "120", "--phases", "timed,whatif"
    )
    assert w["script"]["auto_step"]["chosen_line"] == _line(PREDICT, "for i in range(400):")
    calls = w["script"]["keras_calls"]["predict"]
    assert calls["calls"] >= 60 and calls["samples"] == calls["sized"]
    # The fix the trackers give, applied to the loop: model(x, training=False) in predict's
    # place, its outputs checked against predict's, and far faster (~40 ms -> ~1 ms a call).
    (x,) = [x for x in w["whatif"] if x["id"] == "predict_direct"]
    assert x["status"] == "ok" and x["keeps_results"], x
    assert "max difference 0" in x["results_check"], x
    assert x["predicted_saving_us"] is None and x["verdict"] == "not predicted", x
    assert x["variant_us"] < 0.5 * x["baseline_us"], x
    # Each block read the process's resident memory at its ends.
    assert x["grew_per_step_bytes"] is not None and len(x["grew_per_step_bytes"]) == 2


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


LONG = """
import time

weights = [0.0] * 1000


def train_step(w):
    t = time.perf_counter()
    while time.perf_counter() - t < 1.1:
        for i in range(1000):
            w[i] = w[i] * 0.999 + 0.001
    return w


for step in range(6):
    weights = train_step(weights)
print("done", sum(weights))
"""


def test_a_loop_of_few_iterations_of_over_a_second_is_found(tmp_path: Path):
    # Its second iteration starts after the first second of loop activity: the choice waits
    # for two timed iterations (before, no loop was chosen and the run had no steps).
    w = _auto(tmp_path, "long_steps.py", LONG, "--repeat", "0", "--phases", "timed")
    auto = w["script"]["auto_step"]
    assert auto["chosen_line"] == _line(LONG, "for step in range(6):"), auto
    assert w["script"]["steps"] >= 4
    assert 1.0e6 <= w["step_time"]["median_us"] <= 3.0e6


def test_a_step_function_called_through_a_parameter_default_is_the_loops_call(tmp_path: Path):
    # The TF guide's training_loop(model, x, y, train_fn=train): the step is train's, not loss's.
    from profiler.capture.script import source

    path = write(
        tmp_path,
        "loop.py",
        """
def loss(y, p):
    return y - p


def train(model, x, y):
    return loss(y, model(x))


def training_loop(model, x, y, train_fn=train, *, report_fn=print):
    for epoch in range(10):
        train_fn(model, x, y)
        current = loss(y, model(x))
""",
    )
    (site,) = source.mark_loops(source.load(path))
    assert site.calls == ("train", "loss")


def test_the_loop_around_a_loop_updating_each_parameter_is_the_steps_candidate(tmp_path: Path):
    # cs231n's TwoLayerNet.train: its parameter loop (4 iterations of 0.3 ms in a 17 ms
    # iteration) was the only loop updating the model, never held 30% of the time, and the
    # whole run became one step.
    from profiler.capture.script import source

    path = write(
        tmp_path,
        "twolayer.py",
        """
class TwoLayerNet:
    def train(self, X, y, num_iters=100, learning_rate=1e-3):
        for it in range(num_iters):
            loss, grads = self.loss(X, y)
            for p in self.params:
                self.params[p] -= learning_rate * grads[p]
            for k in range(3):
                print(k)
""",
    )
    sites = {s.line: s for s in source.mark_loops(source.load(path))}
    text = path.read_text().splitlines()
    outer, params, other = (
        text.index(x) + 1
        for x in (
            "        for it in range(num_iters):",
            "            for p in self.params:",
            "            for k in range(3):",
        )
    )
    assert sites[outer].updates and not sites[params].updates and not sites[other].updates
    # An update loop that is no loop over the parameters keeps its place (a batch loop).
    path = write(
        tmp_path,
        "batches.py",
        "for epoch in range(3):\n    for xb in batches:\n        w -= lr * grad(w, xb)\n",
    )
    sites = {s.line: s for s in source.mark_loops(source.load(path))}
    assert sites[2].updates and not sites[1].updates
    # Karpathy's pg-pong: a dict of arrays named model, its gradient accumulated under `if
    # done:` once an episode; the frame loop around it is the candidate (its 10,323 frames of
    # 1.35 ms were no candidate, and the whole run was one step).
    path = write(
        tmp_path,
        "pong.py",
        "while True:\n"
        "    x = frame()\n"
        "    if done:\n"
        "        for k in model: grad_buffer[k] += grad[k]\n"
        "        if episode % 10 == 0:\n"
        "            for k, v in model.items():\n"
        "                model[k] += lr * grad_buffer[k]\n",
    )
    sites = {s.line: s for s in source.mark_loops(source.load(path))}
    assert sites[1].updates and not sites[4].updates and not sites[6].updates


def test_a_loop_run_once_in_a_while_from_the_training_loop_is_not_the_steps(tmp_path: Path):
    # min-char-rnn with a gradient check every 100 iterations (n == 0 first): the check's loop,
    # calling the loss 100 times, was taken as the steps ("one step in every 50" being the
    # training it interrupts).
    from profiler.capture.script import detect, source
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import FakeClock

    path = write(
        tmp_path,
        "rnn.py",
        """
def lossFun(x):
    loss = 0
    for t in range(25):
        loss += x
    return loss


def gradCheck(x):
    for i in range(10):
        lossFun(x)


def evaluate(x):
    for b in range(3):
        lossFun(x)


n = 0
while n < 100:
    if n % 100 == 0:
        gradCheck(n)
    loss = lossFun(n)
    if n % 10 == 0:
        for j in range(2):
            print(j)
    else:
        evaluate(n)
    n += 1
""",
    )
    sites = {s.line: s for s in source.mark_loops(source.load(path))}
    text = path.read_text().splitlines()
    line = {
        k: text.index(v) + 1
        for k, v in {
            "grad": "    for i in range(10):",
            "eval": "    for b in range(3):",
            "loss": "    for t in range(25):",
            "while": "while n < 100:",
            "print": "        for j in range(2):",
        }.items()
    }
    # The check's loop and the loop under the modulo run once in a while; evaluate is called
    # from the else branch (every other iteration): not.
    assert sites[line["grad"]].periodic and sites[line["print"]].periodic
    assert not sites[line["eval"]].periodic and not sites[line["while"]].periodic
    assert not sites[line["loss"]].periodic
    marks = detect.LoopMarks(StepDriver(FakeClock()), list(sites.values()))
    chosen = {s.line for s, c in zip(marks.sites, marks.candidate, strict=True) if c}
    assert line["grad"] not in chosen and line["while"] in chosen, chosen


@pytest.mark.tf
def test_a_validation_functions_calls_between_epochs_are_not_steps(tmp_path: Path) -> None:
    # TF's "training loop from scratch": train_step per batch, then test_step per validation
    # batch after each epoch; 3,140 of 9,400 "steps" were test_step calls. TF's text
    # generation tutorial: 200 generate_one_step calls after training, 302 "steps" in all.
    body = """
    import tensorflow as tf
    w = tf.Variable(tf.zeros([8, 1]))
    opt = tf.keras.optimizers.SGD(0.01)
    x = tf.random.normal([32, 8])
    y = tf.reduce_sum(x, axis=1, keepdims=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w - y) ** 2)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    @tf.function
    def test_step(x, y):
        return tf.reduce_mean((x @ w - y) ** 2)

    class OneStep(tf.Module):
        @tf.function
        def generate_one_step(self, x):
            return x @ w

    for epoch in range(3):
        for i in range(200):
            train_step(x, y)
        for i in range(50):
            test_step(x, y)
    one_step = OneStep()
    for i in range(100):  # TF's text generation tutorial: a character a call, after training
        one_step.generate_one_step(x)
    print("done")
    """
    out = cli(tmp_path, "--phases", "timed", str(write(tmp_path, "scratch.py", body)))
    assert out.returncode == 0, out.stderr[-3000:]
    w = workload(only_run(tmp_path))
    assert w["script"]["detection"]["source"] == "tf_function", w["script"]["detection"]
    # The first train_step call was held back while its loop was watched (one call an
    # iteration: the calls are the steps), a step all the same.
    held = w["script"]["auto_step"]["held_calls"]
    assert held == 1 and w["script"]["steps"] + held == 600, w["script"]["steps"]


KMEANS = """
import math
import random

def distance(a, b):
    return math.sqrt(sum([(x1 - x2) ** 2 for x1, x2 in zip(a, b)]))

def kmean(k, points, iterations=60):
    classes = [0] * len(points)
    centroids = random.sample(points, k)
    for w in range(iterations):
        for i, point in enumerate(points):
            classes[i] = min(range(k), key=lambda x: distance(point, centroids[x]))
        for i, centroid in enumerate(centroids):
            group = [points[j] for j, c in enumerate(classes) if c == i]
            centroids[i] = tuple([sum(a) / len(a) for a in zip(*group)])
    return classes

random.seed(0)
points = [(random.gauss(i % 5, 1.0), random.gauss(i % 3, 1.0)) for i in range(2000)]
for n in range(3):  # a loop before the training, beside its loop: not inside a step
    points = [tuple(p) for p in points]
print(kmean(5, points)[:10])
"""


@pytest.mark.slow
def test_a_pure_python_steps_loop_over_its_points_is_named_with_its_line(tmp_path: Path):
    """A k-means written with lists: the step is an iteration of ``for w in range(iterations)``
    and 80-90% of it is the loop over the points, which names no training: it is counted and
    timed all the same, and the finding says to vectorise it (a course script's shape that got
    "no finding fired" while the same iteration in numpy measured 16x faster)."""
    w = _auto(tmp_path, "kmeans.py", KMEANS)
    auto = w["script"]["auto_step"]
    assert auto["chosen_line"] == _line(KMEANS, "for w in range(iterations):")
    inner = next(lp for lp in auto["loops"] if lp["line"] == _line(KMEANS, "for i, point in"))
    assert not inner["candidate"] and inner["iterations"] >= 2000 and inner["mean_us"]
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    (d,) = [d for d in doc["diagnoses"] if d["rule"] == "per_sample_loop"]
    # The loop over the points first; the centroids' loop (5 iterations, each a comprehension
    # over the points) joins it where its share reaches the bar (beside other work, once).
    point, centroid = _line(KMEANS, "for i, point in"), _line(KMEANS, "for i, centroid in")
    assert d["message"].count(f"runs the loop at line {point} (kmean)") or (
        f"runs the loops at lines {point} and {centroid} (kmean)" in d["message"]
    ), d["message"]
    assert "Vectorise the loop" in d["fix"]


CNN = """
import numpy as np


class Softmax:
    def backprop(self, d_out, lr):
        for i, gradient in enumerate(d_out):
            if gradient == 0:
                continue
            self.weights -= lr * gradient
            return gradient


class Conv:
    def backprop(self, d_out, lr):
        for f in range(4):
            self.filters[f] -= lr * d_out[f]


def train(im, label):
    softmax.backprop(np.eye(10)[label], 0.1)
    conv.backprop(np.ones(4), 0.1)


softmax, conv = Softmax(), Conv()
softmax.weights, conv.filters = np.zeros(10), np.zeros(4)
for im, label in zip(range(3), [2, 5, 7]):
    train(im, label)
"""


def test_a_loop_its_function_returns_from_ends_there_and_the_loop_driving_it_is_known(
    tmp_path: Path,
):
    # A CNN from scratch (one image an iteration): the softmax layer's backprop returns from
    # inside its loop at the label's gradient; its end was never marked, its iteration timed
    # from that return to the next call's loop (the whole image's step), and it was taken as
    # the steps. The image loop calls train(), whose layers' loops update the weights.
    import ast

    from profiler.capture.script import source

    path = write(tmp_path, "cnn.py", CNN)
    src = source.load(path)
    sites = {s.line: s for s in source.mark_loops(src)}
    lines = CNN.splitlines()
    soft, conv, images = (
        lines.index(x) + 1
        for x in (
            "        for i, gradient in enumerate(d_out):",
            "        for f in range(4):",
            "for im, label in zip(range(3), [2, 5, 7]):",
        )
    )
    assert sites[soft].updates and sites[conv].updates
    assert sites[images].drives and not sites[images].updates
    assert "try:" in ast.unparse(src.tree)
    seen: list[tuple[str, int]] = []
    g = {
        source.LOOP_MARK: lambda k: seen.append(("mark", sites_by_index[k])),
        source.LOOP_END: lambda k: seen.append(("end", sites_by_index[k])),
        source.LOOP_ON: bytearray([1] * len(sites)),
    }
    sites_by_index = {s.index: s.line for s in sites.values()}
    exec(src.compile(), g)
    # Each call of the softmax backprop ends its loop, at its return.
    assert seen.count(("end", soft)) == 3 and seen.count(("end", conv)) == 3
    assert seen.count(("mark", images)) == 3 and seen[-1] == ("end", images)


def test_a_loop_driving_short_updating_loops_is_chosen_as_the_steps(tmp_path: Path):
    # The same CNN watched: the per-filter update loop (7 µs iterations, ending 676 times an
    # image) against the image loop (~17 ms an iteration) that calls the layers: the image
    # loop is the steps.
    from profiler.capture.script import detect, source
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import FakeClock

    path = write(tmp_path, "cnn.py", CNN)
    sites = source.mark_loops(source.load(path))
    by_line = {s.line: s.index for s in sites}
    lines = CNN.splitlines()
    images = by_line[lines.index("for im, label in zip(range(3), [2, 5, 7]):") + 1]
    conv = by_line[lines.index("        for f in range(4):") + 1]
    clock = FakeClock(start_ns=1)
    marks = detect.LoopMarks(StepDriver(clock), sites)
    marks._step = lambda: None  # the choice alone: no schedule takes the steps
    for _ in range(80):  # 80 images of 17 ms, each running the filter loop 20 times
        marks.mark(images)
        for _ in range(20):
            for _ in range(4):
                marks.mark(conv)
                clock.advance(200_000)
            marks.end(conv)
        clock.advance(1_000_000)
        if marks.decided:
            break
    assert marks.decided and marks.chosen == images, marks.why


def test_loops_that_are_no_candidate_make_no_mark_call_until_a_candidate_starts():
    """A data-preparation loop before the training (no training named) pays an index of the
    flags, not a call, per iteration; once a candidate loop starts, every loop is counted (the
    step's inner loops); after the choice, only the chosen loop's iterations call."""
    import ast

    from profiler.capture.script import source
    from profiler.capture.script.detect import LoopMarks
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import now_ns

    body = (
        "rows = []\n"
        "for i in range(50):\n"
        "    rows.append(i)\n"
        "w = 0.0\n"
        "for step in range(3):\n"
        "    loss = w - 1.0\n"
        "    for j in range(4):\n"
        "        pass\n"
        "    w -= 0.1 * loss\n"
    )
    src = source.Source(Path("t.py"), ast.parse(body))
    sites = source.mark_loops(src)
    marks = LoopMarks(StepDriver(now_ns), sites)
    data, train, inner = (next(s.index for s in sites if s.line == n) for n in (2, 5, 7))
    assert marks.candidate[train] and not marks.candidate[data]
    assert list(marks.on) == [k == train for k in range(3)]
    calls: list[int] = []

    def mark(k: int) -> None:
        calls.append(k)
        marks.mark(k)

    exec(
        src.compile(),
        {source.LOOP_MARK: mark, source.LOOP_END: marks.end, source.LOOP_ON: marks.on},
    )
    assert data not in calls  # its 50 iterations ran before any candidate
    assert calls.count(train) == 3 and calls.count(inner) == 12


def _run_calls(tmp_path: Path, body: str) -> tuple[object, object, list[int]]:
    """``body`` run with its loops marked and ``update``/``sync`` standing in for tf.functions
    (each outermost call a framework step unless held back): (the loops, the driver, the step
    ends' call counts)."""
    import ast

    from profiler.capture.script import detect, source
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import FakeClock

    src = source.Source(tmp_path / "rl.py", ast.parse(body))
    sites = source.mark_loops(src)
    clock = FakeClock(start_ns=1)
    d = StepDriver(clock)
    d._arm(None)
    marks = detect.LoopMarks(d, sites)
    made = [0]

    def fake(_name: str):
        def call() -> None:
            made[0] += 1
            clock.advance(2_000_000)

        return detect.wrap_call(call, d, "tf_function")

    ends: list[int] = []
    boundary = d.boundary

    def counted() -> None:
        ends.append(made[0])
        boundary()

    d.boundary = counted  # type: ignore[method-assign]
    g = {
        source.LOOP_MARK: marks.mark,
        source.LOOP_END: marks.end,
        source.LOOP_ON: marks.on,
        "update": fake("update"),
        "sync": fake("sync"),
        "go": fake("go"),
        "act": lambda: clock.advance(5_000_000),
    }
    exec(src.compile(), g)
    return marks, d, ends


def test_a_loop_whose_iterations_make_several_tf_function_calls_is_the_steps(tmp_path: Path):
    # Keras's DDPG example: per environment step an eager actor call, one update and two
    # target updates (tf.functions): the iterations are the steps, not the three calls.
    marks, d, ends = _run_calls(
        tmp_path,
        "for episode in range(2):\n"
        "    for t in range(50):\n"
        "        act()\n"
        "        update()\n"
        "        sync()\n"
        "        sync()\n",
    )
    assert marks.chosen >= 0 and marks.sites[marks.chosen].line == 2, marks.why
    assert "3 tf.function calls" in marks.why
    assert d.detectors["tf_function"].steps == 0
    assert d.detectors["auto_loop"].steps == d.done
    # Every step is one iteration of three calls; the first three iterations were watched.
    assert {b - a for a, b in itertools.pairwise(ends)} == {3}
    assert marks.record()["held_calls"] == 9 and marks.record()["watched_iterations"] == 3


def test_a_loop_of_one_tf_function_call_an_iteration_keeps_the_calls_as_steps(tmp_path: Path):
    marks, d, ends = _run_calls(
        tmp_path,
        "for epoch in range(3):\n    for batch in range(40):\n        update()\n",
    )
    assert marks.chosen < 0 and marks.why == "steps came from the framework first"
    # Only the first call was held back (the iteration before the next made one call), a
    # step all the same.
    assert marks.record()["held_calls"] == 1 and marks.watched()[0] == 1
    assert d.detectors["tf_function"].steps == 119 == d.done


def test_an_epoch_loop_around_a_loop_of_calls_is_not_taken_for_its_calls(tmp_path: Path):
    # The epoch loop names training, the batch loop inside it does not: its iterations (one
    # call each) are the steps, not the epochs of five calls.
    marks, d, _ = _run_calls(
        tmp_path,
        "for epoch in range(6):\n    for x in range(5):\n        go()\n",
    )
    assert not marks.candidate[1] and marks.candidate[0]
    assert marks.chosen < 0, marks.why
    assert d.detectors["tf_function"].steps == d.done >= 30 - marks.record()["held_calls"]


def test_a_training_loop_in_a_module_beside_the_script_is_found(tmp_path: Path):
    # CS231n's Solver: the script builds the data and calls solver.train(), whose loop over
    # the iterations is in cs231n/solver.py; only the script's loops were watched and the
    # whole run was one step.
    pkg = tmp_path / "course"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "solver.py").write_text(
        "import numpy as np\n"
        "\n"
        "\n"
        "class Solver:\n"
        "    def __init__(self, x, y):\n"
        "        self.x, self.y, self.w = x, y, np.zeros((x.shape[1], 1))\n"
        "\n"
        "    def _step(self):\n"
        "        grad = self.x.T @ (self.x @ self.w - self.y) / len(self.x)\n"
        "        self.w -= 0.01 * grad\n"
        "\n"
        "    def train(self, iterations):\n"
        "        for t in range(iterations):\n"
        "            self._step()\n"
    )
    body = """
    import numpy as np
    from course.solver import Solver

    x = np.random.rand(256, 64)
    y = x.sum(axis=1, keepdims=True)
    Solver(x, y).train(3000)
    print("done")
    """
    # 3,000 iterations of ~10-20 µs end before the watcher chooses (a clean clone's run found
    # no steps at 20,000): the script runs again with that loop, by its file and line, as the
    # steps from the first iteration.
    w = _auto(tmp_path, "train.py", body, "--phases", "timed")
    auto = w["script"]["auto_step"]
    assert (auto["chosen_line"], auto["chosen_file"]) == (13, "course/solver.py"), auto["why"]
    assert "line 13 of course/solver.py" in auto["why"]
    assert auto["files"] == ["course/solver.py"]
    assert w["script"]["steps"] + auto["watched_iterations"] == 3000
    # No bytecode of the marked module was written beside it.
    assert not list(pkg.glob("__pycache__/solver*.pyc"))


def test_a_modules_loops_are_numbered_after_the_scripts_and_chosen_among_them():
    import ast

    from profiler.capture.script import detect, source
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import FakeClock

    script = source.Source(Path("t.py"), ast.parse("for i in range(3):\n    rows = i\n"))
    module = source.Source(
        Path("m.py"), ast.parse("def fit(n):\n    for t in range(n):\n        update()\n")
    )
    marks = detect.LoopMarks(StepDriver(FakeClock(start_ns=1)), source.mark_loops(script))
    assert marks.candidate == [True]  # no loop updates: every loop a candidate
    sites = source.mark_loops(module, first=len(marks.sites), file="m.py")
    assert [(s.index, s.file) for s in sites] == [(1, "m.py")]
    on = marks.on
    marks.add(sites)
    # The module's loop updates the model: the only candidate now; the flags extended in place.
    assert marks.candidate == [False, True] and marks.on is on and list(on) == [0, 1]
    assert detect.LoopMarks.where(sites[0]) == "line 2 of m.py"

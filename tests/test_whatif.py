"""What-ifs on small real scripts: each fix that applies is applied by the profiler to the
script's own loop, measured in alternating blocks, and compared with its prediction; the
results are kept (or the what-if says they may change and runs only with --whatif all); a
loop it does not apply to gets none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_script_run import DATA, cli, only_run, phase, workload, write


def _whatifs(tmp_path: Path, *args: str) -> tuple[dict, dict[str, dict], str]:
    out = cli(tmp_path, *args)
    assert out.returncode == 0, out.stderr[-3000:]
    w = workload(only_run(tmp_path))
    return w, {x["id"]: x for x in w.get("whatif") or []}, out.stdout


@pytest.mark.tf
@pytest.mark.slow
def test_tf1_session_run_through_a_native_callable_saves_what_was_predicted(tmp_path: Path):
    w, found, stdout = _whatifs(
        tmp_path, "--tf1", "--max-steps", "4000", str(DATA / "seed000_tf1.py")
    )
    x = found["tf1_callable"]
    assert x["status"] == "ok" and x["pairs"] >= 2
    # The sign the attribution predicts (feed/fetch, session.run's Python, the per-call cost).
    assert x["predicted_saving_us"] > 0 and x["measured_saving_us"] > 0
    assert x["variant_us"] < x["baseline_us"]
    # The verdict follows the saving's interval: "inconclusive" when it reaches zero (a clean
    # clone's suite beside another test process measured that once), else "holds" when it
    # reaches the prediction's tolerance band and "misses" when it does not.
    low, high = x["interval_us"]
    p, tol = x["predicted_saving_us"], x["tolerance_us"]
    if low <= 0:
        assert x["verdict"] == "inconclusive"
        assert (
            "measured on your loop, not shown to be a fix here (slower, or within the "
            "machine's noise):" in stdout
        )
    else:
        assert (low <= p + tol and high >= p - tol) == (x["verdict"] == "holds")
        assert x["verdict"] in ("holds", "misses")
        assert "what would fix it, measured on your loop:" in stdout
    # Same results: the loss through the callable equals session.run's on the same feeds.
    assert x["keeps_results"] and "max difference 0" in x["results_check"]
    assert any("Measured on your loop" in d["fix"] for d in _findings(tmp_path, w))
    # The seed feeds the same float64 arrays to float32 placeholders every step: converted
    # once instead, the per-step cast goes (its prediction: the attribution's cast part).
    once = found["tf1_feeds_once"]
    assert once["status"] == "ok" and once["removes"] == ["feed_fetch.cast"]
    assert "tf_x_data" in once["title"] and "tf_y_data" in once["title"]
    assert once["keeps_results"] and "bit for bit" in once["results_check"]
    # A cast of a few µs on a ~250 µs step, against the variant's own swap of the feed dict
    # (about as long): its interval may span zero, or lie below it on another machine (a
    # clean-clone suite measured it slower once). Measured slower, it is no fix wherever a
    # finding quotes it.
    assert once["measured_saving_us"] is not None
    assert once["verdict"] in ("holds", "misses", "inconclusive", "slower")
    quoted = [d["fix"] for d in _findings(tmp_path, w) if once["title"] in d["fix"]]
    if once["verdict"] == "slower":
        assert all("not a fix on this loop" in f for f in quoted), quoted
    elif once["verdict"] == "inconclusive":
        # No evidence against it where the interval is too wide to rule the prediction out.
        assert all("not a fix on this loop" in f or "inconclusive" in f for f in quoted), quoted
    assert once["interval_us"] is None or once["interval_us"][0] <= once["interval_us"][1]


def _findings(tmp_path: Path, w: dict) -> list[dict]:
    import json

    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    return [d for d in doc["diagnoses"] if d["name"] == w["name"]]


RETRACING = """
import tensorflow as tf

w = tf.Variable(tf.zeros((8, 1)))
x = tf.random.normal((64, 8))
opt = tf.keras.optimizers.SGD(0.01)


@tf.function
def train_step(x, step):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - 1.0) ** 2)
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss


for step in range(250):
    loss = train_step(x, step)
print(float(loss))
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_retraced_python_number_passed_as_a_tensor_removes_the_tracing(tmp_path: Path):
    script = write(tmp_path, "retrace.py", RETRACING)
    w, found, _ = _whatifs(
        tmp_path, "--phases", "timed,hooks,whatif", "--whatif-only", "tensor_args", str(script)
    )
    x = found["tensor_args"]
    assert x["status"] in ("ok", "partial"), x
    assert "step" in x["title"] and x["removes"] == ["tracing"]
    assert x["measured_saving_us"] > 0 and x["predicted_saving_us"] > 0
    assert x["variant_us"] < 0.5 * x["baseline_us"]  # a trace per step is most of it
    # One step from the same state, both ways: the loss and the variables come out the same.
    assert x["keeps_results"] and "variables equal the function's" in x["results_check"]


SUMMARY_STEP = """
import tempfile

import tensorflow as tf

w = tf.Variable(tf.zeros((8, 1)))
x = tf.random.normal((64, 8))
opt = tf.keras.optimizers.SGD(0.01)
writer = tf.summary.create_file_writer(tempfile.mkdtemp())


@tf.function
def train_step(x, step):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - 1.0) ** 2)
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    with writer.as_default():
        tf.summary.scalar("loss", loss, step=step)  # step= takes no int32 tensor
    return loss


for step in range(250):
    loss = train_step(x, step)
print(float(loss))
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_retrace_seen_after_the_plan_is_still_measured_with_the_dtype_the_function_takes(
    tmp_path: Path,
):
    # Every phase: the plan is made at the first steps, before the second trace shows the
    # retracing; tf.summary's step= needs an int64 tensor, not tf.constant's int32. Only that
    # what-if is measured (it is asked for again when the phase runs, as every what-if is).
    script = write(tmp_path, "summary_step.py", SUMMARY_STEP)
    w, found, stdout = _whatifs(tmp_path, "--whatif-only", "tensor_args", str(script))
    x = found["tensor_args"]
    assert x["status"] == "ok" and x["verdict"] in ("holds", "misses"), x
    assert x["measured_saving_us"] > 0 and x["variant_us"] < 0.5 * x["baseline_us"]
    assert "variables equal the function's" in x["results_check"]
    assert "Measured on your loop, with train_step called with step as a tensor" in stdout
    assert w["script"]["ended"] == "completed"


EAGER = """
import tensorflow as tf

w = tf.Variable(tf.zeros((16, 1)))
x = tf.random.normal((64, 16))
opt = tf.keras.optimizers.SGD(0.01)


def train_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - 1.0) ** 2)
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss


for step in range(1500):
    loss = train_step(x)
print(float(loss))
"""


@pytest.mark.tf
@pytest.mark.slow
def test_an_eager_step_in_tf_function_runs_only_with_whatif_all(tmp_path: Path):
    script = write(tmp_path, "eager.py", EAGER)
    # Whether it runs is decided from the script alone: no measurement phase is needed.
    only = ("--whatif-only", "eager_function")
    w, found, _ = _whatifs(
        tmp_path, *only, "--phases", "timed,whatif", "--max-steps", "300", str(script)
    )
    assert "eager_function" not in found
    not_run = dict(phase(w, "whatif")["data"]["not_run"])
    assert "--whatif all" in not_run["eager_function"]
    other = tmp_path / "all"
    other.mkdir()
    w, found, _ = _whatifs(
        other,
        "--whatif",
        "all",
        *only,
        "--phases",
        "timed,hooks,whatif",
        "--max-steps",
        "1200",
        str(script),
    )
    x = found["eager_function"]
    assert x["status"] == "ok" and not x["keeps_results"]
    assert x["title"] == "train_step wrapped in tf.function"
    assert x["measured_saving_us"] > 0 and x["variant_us"] < x["baseline_us"]


# The same loop, its step a tf.function, with a debugging switch left on.
SWITCHED = EAGER.replace(
    "w = tf.Variable", "tf.config.run_functions_eagerly(True)  # left on\nw = tf.Variable", 1
).replace("\n\ndef train_step", "\n\n@tf.function\ndef train_step", 1)


@pytest.mark.tf
@pytest.mark.slow
def test_functions_run_eagerly_by_the_debugging_switch_are_measured_as_graphs(tmp_path: Path):
    # A custom loop left with tf.config.run_functions_eagerly(True): 19.0 ms a step, 1.1 ms
    # without it; the verdict led with "several steps per tf.function call" (no help) and an
    # XLA what-if compared eager with eager.
    script = write(tmp_path, "switched.py", SWITCHED)
    only = ("--whatif-only", "functions_graph,function_jit,keras_jit")
    w, found, stdout = _whatifs(
        tmp_path, *only, "--phases", "timed,whatif", "--max-steps", "600", str(script)
    )
    # The steps are the tf.function's calls, measured as the eager loop they are; the switch
    # was on again when the script ended (the what-ifs put it back).
    assert w["script"]["functions_eagerly"] is True
    assert any("run_functions_eagerly(True) is in force" in n for n in w["script"]["notes"])
    x = found["functions_graph"]
    assert x["status"] == "ok" and x["keeps_results"], x
    assert x["variant_us"] < x["baseline_us"] / 2, x
    not_run = dict(phase(w, "whatif")["data"]["not_run"])
    assert "run_functions_eagerly(True)" in not_run["function_jit"], not_run
    assert "tf.config.run_functions_eagerly(True) taken out" in stdout
    # A function written for eager debugging that cannot trace (a .numpy() inside): the what-if
    # fails, its call runs eagerly as written, and the script runs to its end.
    other = tmp_path / "numpy_inside"
    other.mkdir()
    script = write(
        other,
        "switched.py",
        "seen = []\n"
        + SWITCHED.replace(
            "    return loss\n",
            "    seen.append(loss.numpy())\n    return loss\n",
            1,
        ),
    )
    w, found, stdout = _whatifs(
        other, "--whatif-only", "functions_graph", "--phases", "timed,whatif",
        "--max-steps", "600", str(script),
    )  # fmt: skip
    assert found["functions_graph"]["status"] == "failed", found
    assert w["status"] == "ok" and w["script"]["functions_eagerly"] is True


CHECKED = """
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)  # a reproducibility recipe's
tf.debugging.enable_check_numerics()  # left on after debugging
w = tf.Variable(tf.zeros((16, 1)))
x = tf.random.normal((64, 16))


@tf.function
def step(x):
    return tf.reduce_sum(x @ w)


for i in range(400):
    step(x)
"""


@pytest.mark.tf
def test_switches_a_script_leaves_on_are_read_from_its_own_thread(tmp_path: Path) -> None:
    # enable_check_numerics keeps its callback thread-local: read from the schedule's thread
    # it was always "off" (the debugger guide's MLP, 27 ms a step with it, 7 ms without).
    script = write(tmp_path, "checked.py", CHECKED)
    out = cli(tmp_path, "--phases", "timed", "--no-progress", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    s = workload(only_run(tmp_path))["script"]
    assert s["check_numerics"] is True
    assert s["tf_threads"] == {"intra": 1, "inter": 0}


NUMPY = """
import numpy as np

w = np.zeros(8)
x = np.random.rand(64, 8)
for step in range(300000):
    grad = x.T @ (x @ w - 1.0) / 64
    w -= 0.01 * grad
"""


def test_a_small_numpy_loop_gets_no_what_if(tmp_path: Path):
    # Its arrays are too small for the numpy what-if (float32): the only one a numpy loop gets.
    script = write(tmp_path, "np_loop.py", NUMPY)
    w, found, stdout = _whatifs(
        tmp_path, "--phases", "timed,whatif", "--max-steps", "2000", str(script)
    )
    assert found == {} and "whatif" not in w
    p = phase(w, "whatif")
    assert p["status"] == "skipped" and "numpy_float32: " in p["reason"], p["reason"]
    assert "measured on your loop" not in stdout


def test_no_whatif_skips_the_phase(tmp_path: Path):
    script = write(tmp_path, "np_loop.py", NUMPY)
    out = cli(
        tmp_path, "--no-whatif", "--phases", "timed,whatif", "--max-steps", "2000", str(script)
    )
    assert out.returncode == 0, out.stderr
    p = phase(workload(only_run(tmp_path)), "whatif")
    assert p["status"] == "skipped" and p["reason"] == "--no-whatif"


FUNCTION_STEP = """
import tensorflow as tf

w = tf.Variable(tf.zeros((32, 1)))
x = tf.random.normal((128, 32))


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        h = tf.tanh(x @ tf.ones((32, 32))) * 0.5 + 0.1
        loss = tf.reduce_mean((h @ w - 1.0) ** 2)
    w.assign_sub(0.01 * tape.gradient(loss, w))
    return loss


for step in range(100000):
    loss = train_step()
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_tf_function_step_compiled_with_xla_is_measured_on_the_loop(tmp_path: Path):
    script = write(tmp_path, "function_step.py", FUNCTION_STEP)
    w, found, _ = _whatifs(tmp_path, "--max-steps", "3000", str(script))
    x = found["function_jit"]
    assert x["title"] == "train_step compiled with XLA (tf.function(jit_compile=True))"
    assert x["removes"] == ["dispatch.per_op"] and x["keeps_results"]
    assert "variables equal the function's" in x["results_check"]  # within XLA's tolerance
    # XLA compiles it on this machine: measured in blocks, with a verdict on the prediction.
    assert x["status"] in ("ok", "partial"), x
    assert x["pairs"] >= 1 and x["baseline_us"] > 0 and x["variant_us"] > 0
    # The interval decides: XLA may be no faster on this tiny step (then never a fix).
    assert x["verdict"] in ("holds", "misses", "inconclusive", "slower")
    # The script's own function is untouched after the phase: its later steps trace no more.
    assert [f["retraces"] for f in w["script"]["functions"] if f["name"] == "train_step"] == [0]


SHAPES = """
import tensorflow as tf

w = tf.Variable(tf.zeros((8, 1)))


@tf.function
def train_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - 1.0) ** 2)
    w.assign_sub(0.01 * tape.gradient(loss, w))
    return loss


for step in range(200):
    loss = train_step(tf.ones((8 + step, 8)))  # a new batch size every step
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_function_retraced_on_new_shapes_gets_reduce_retracing(tmp_path: Path):
    script = write(tmp_path, "shapes.py", SHAPES)
    only = ("--whatif-only", "reduce_retracing,tensor_args")
    w, found, _ = _whatifs(tmp_path, *only, "--phases", "timed,hooks,whatif", str(script))
    assert "tensor_args" not in found  # no Python number changes
    x = found["reduce_retracing"]
    assert x["status"] in ("ok", "partial"), x
    assert x["title"] == "train_step traced with reduce_retracing=True (x change shape)"
    assert x["removes"] == ["tracing"] and x["keeps_results"]
    assert "variables equal the function's" in x["results_check"]
    # A trace per step is most of the step; the generalised function traces once or twice.
    assert x["variant_us"] < 0.5 * x["baseline_us"]
    assert x["measured_saving_us"] > 0 and x["predicted_saving_us"] > 0


KERAS_FIT = """
import numpy as np
import keras

x = np.random.rand(2048, 16).astype("float32")
y = np.random.rand(2048, 1).astype("float32")
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dropout(0.2),
     keras.layers.Dense(1)]
)
model.compile("adam", "mse")
model.fit(x, y, epochs=20, batch_size=32, verbose=0)
"""


@pytest.mark.tf
@pytest.mark.slow
def test_fits_own_tf_functions_get_no_function_what_if(tmp_path: Path):
    # fit's train function is a tf.function whose iterator part XLA cannot compile: only
    # keras_jit (which compiles the step on the data, as Keras does) applies to a fit.
    script = write(tmp_path, "fit.py", KERAS_FIT)
    only = ("--whatif-only", "keras_jit,function_jit,reduce_retracing")
    w, found, _ = _whatifs(tmp_path, *only, "--phases", "timed,whatif", str(script))
    assert w["script"]["ended"] == "completed"
    assert "function_jit" not in found and "reduce_retracing" not in found
    not_run = dict(phase(w, "whatif")["data"]["not_run"])
    assert "of the script" in not_run["function_jit"]
    assert "keras_jit" in found


@pytest.mark.tf
@pytest.mark.slow
def test_a_fit_compiled_with_xla_is_measured_without_it_and_its_step_is_compute(tmp_path: Path):
    # Keras's image classification example compiles with jit_compile=True: its step read "0 µs
    # of kernels, dispatch 82%" (the tracer sees none of XLA's kernels on a CPU) and its fix was
    # the XLA it had on, which made it 2.5x slower without the profiler.
    script = write(tmp_path, "fit_xla.py", KERAS_FIT.replace('compile("adam", "mse")', XLA_COMPILE))
    phases = ("--phases", "timed,sampled,framework,whatif", "--whatif-only", "keras_jit")
    w, found, stdout = _whatifs(tmp_path, *phases, str(script))
    assert w["script"]["fit"]["jit_compile"] is True
    x = found["keras_jit"]
    assert x["status"] == "ok" and x["title"].startswith("fit's train function without XLA")
    # Not predicted (XLA off adds kernels back): measured only.
    assert x["predicted_saving_us"] is None and x["pairs"] >= 2
    att = w["attribution"]
    assert any(s.startswith("XLA-compiled") for s in att["sources"]["compute"]), att["sources"]
    assert att["share"]["compute"] > att["share"]["dispatch"], att["share"]
    # XLA is never the advice to a step that has it on.
    assert "XLA (jit_compile=True) fuses them" not in stdout
    assert "XLA with jit_compile=True: time it" not in stdout


XLA_COMPILE = 'compile("adam", "mse", jit_compile=True)'


KERAS_SAME_BATCHES = """
import numpy as np
import keras

keras.utils.set_random_seed(1)
x = np.random.rand(6400, 64).astype("float32")
y = (x.sum(1) > 32).astype("int32")
model = keras.Sequential(
    [keras.Input((64,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(2)]
)
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, epochs=20, batch_size=32, shuffle=False, verbose=0)
print("iterations", int(model.optimizer.iterations.numpy()))
print("loss %.9f" % float(model.evaluate(x, y, verbose=0)))
"""


@pytest.mark.tf
@pytest.mark.slow
def test_fit_with_k_batches_per_call_trains_on_the_same_batches_and_saves_the_calls(
    tmp_path: Path,
):
    import subprocess
    import sys

    script = write(tmp_path, "fit_k.py", KERAS_SAME_BATCHES)
    plain = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    ).stdout.split("\n")
    w, found, stdout = _whatifs(tmp_path, "--phases", "timed,whatif", str(script))
    for k in (4, 16):
        x = found[f"keras_steps_{k}"]
        assert x["status"] == "ok" and x["group"] == k, x
        assert x["block_steps"] % k == 0 and x["removes_share"] == pytest.approx(1 - 1 / k)
        assert x["keeps_results"]
        # One call in k: a tiny model's batch is mostly the call, so the saving is positive.
        # No phase measured the categories it removes: not predicted, never a zero.
        assert x["measured_saving_us"] > 0
        assert x["predicted_saving_us"] is None
        assert x["verdict"] in ("not predicted", "inconclusive")
    # Every batch was trained on, once each, in order: the optimizer counted 20 x 200 steps
    # and the loss matches the plain run's (keras_jit ran some batches through XLA too).
    lines = stdout.split("\n")
    assert "iterations 4000" in lines and "iterations 4000" in plain
    assert "fit_k.py: the script ran to its end: 4,000 steps" in lines
    loss = float(next(s for s in lines if s.startswith("loss ")).split()[1])
    want = float(next(s for s in plain if s.startswith("loss ")).split()[1])
    assert loss == pytest.approx(want, rel=1e-4)
    assert "fit running 16 batches per train-function call" in stdout


TF_DATA_LOOP = """
import time

import tensorflow as tf

def heavy(x):
    for _ in range(12):
        x = tf.math.sin(x) + tf.math.cos(x)
    return x

options = tf.data.Options()
options.experimental_optimization.apply_default_optimizations = False
ds = (
    tf.data.Dataset.from_tensor_slices(tf.random.normal((4096, 256)))
    .map(heavy)
    .batch(8)
    .repeat()
    .with_options(options)
)
w = tf.Variable(tf.zeros((256, 1)))

@tf.function
def train_step(x):
    w.assign_sub(0.0001 * tf.reduce_mean(x) * tf.ones((256, 1)))
    return tf.reduce_sum(w)

for step, x in enumerate(ds):
    train_step(x)
    time.sleep(0.0015)  # the host waits, as for an accelerator's step: time a prefetch can use
    if step == 3000:
        break
"""


@pytest.mark.tf
@pytest.mark.slow
def test_tf_data_what_ifs_read_a_second_pipeline_and_run_only_with_whatif_all(tmp_path: Path):
    script = write(tmp_path, "data_loop.py", TF_DATA_LOOP)
    # Whether they run is decided when the plan is made: a few hundred steps show it.
    only = ("--whatif-only", "tf_data_prefetch,tf_data_parallel")
    w, found, _ = _whatifs(
        tmp_path, *only, "--phases", "timed,whatif", "--max-steps", "300", str(script)
    )
    not_run = dict(phase(w, "whatif")["data"]["not_run"])
    for key in ("tf_data_prefetch", "tf_data_parallel"):
        assert key not in found and "--whatif all" in not_run[key]
    other = tmp_path / "all"
    other.mkdir()
    w, found, _ = _whatifs(
        other,
        "--whatif",
        "all",
        *only,
        "--phases",
        "timed,whatif",
        str(script),
    )
    assert w["script"]["ended"] == "completed"
    par, pre = found["tf_data_parallel"], found["tf_data_prefetch"]
    assert par["title"].startswith("the pipeline's maps (heavy")
    assert pre["title"] == "the input pipeline with .prefetch(tf.data.AUTOTUNE) at its end"
    for x in (par, pre):
        assert x["status"] == "ok" and not x["keeps_results"] and x["removes"] == ["feed_fetch"]
        assert x["measured_saving_us"] is not None and x["pairs"] >= 2
    # A prefetch overlaps the serial map with the step when a core is free (it waited less
    # alone; beside the other test worker, 3,162 -> 3,208 µs once): its verdict is what its
    # interval supports, whichever way the machine let it go.
    from profiler.analysis import whatif as whatif_analysis

    iv = pre["interval_us"]
    assert pre["verdict"] == whatif_analysis.verdict_for(
        tuple(iv) if iv else None, pre["predicted_saving_us"], pre["tolerance_us"]
    )
    # Parallel maps on 2 shared cores compete with the step for them: measured either way here
    # (1,617 -> 1,255 µs in one run, 1,195 -> 1,278 in another): measured, with its resolution.
    assert par["verdict"] != "failed" and par["resolution_us"] is not None


GAN_ITERATION = """
import numpy as np
import keras

gen = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8)])
disc = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
disc.compile("adam", "mse")
real = np.random.rand(32, 8).astype("float32")
ones, zeros = np.ones((32, 1)), np.zeros((32, 1))
for i in range(600):
    fake = gen.predict(np.random.rand(32, 16).astype("float32"), verbose=0)
    fake[0, 0] = 0.0  # predict's output is the script's to write (as a DQN's target)
    disc.train_on_batch(real, ones)
    disc.train_on_batch(fake, zeros)
    disc.train_on_batch(real, ones)
    if i % 50 == 0:  # sample images now and then, as GANs' scripts do
        gen.predict(np.random.rand(25, 16).astype("float32"), verbose=0)
"""


@pytest.mark.tf
def test_a_predict_once_every_three_steps_is_measured_over_groups_of_three(tmp_path: Path):
    # A GAN's generator.predict once an iteration of three train_on_batch calls: the
    # iteration is the step (its three tf.function calls are parts of it), so each step holds
    # one predict and the blocks' steps are compared one by one. (When each call was a step,
    # each block's figure was the mean of each group of 3 steps, so that each held one predict:
    # a block's median step held none, and the what-if measured no change.)
    script = write(tmp_path, "gan_iteration.py", GAN_ITERATION)
    # 300 iterations: the 900 train_on_batch calls that were 900 steps.
    w, found, _ = _whatifs(tmp_path, "--max-steps", "300", "--phases", "timed,whatif", str(script))
    assert w["script"]["detection"]["source"] == "auto_loop", w["script"]["detection"]
    x = found["predict_direct"]
    assert x["status"] == "ok" and x["group"] == 1 and x["keeps_results"], x
    # predict's per-call set-up (tens of ms) against a direct call of ~1 ms, over 3 steps.
    assert x["variant_us"] < 0.6 * x["baseline_us"], x
    # The verdict follows the interval: beside another test process a few pairs of short
    # blocks can reach zero (inconclusive then), else the saving is measured, not predicted.
    low = x["interval_us"][0]
    assert x["measured_saving_us"] > 0 and x["verdict"] == (
        "not predicted" if low > 0 else "inconclusive"
    ), x


TF1_RANDOM_LOSS = """
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
x = tf.placeholder(tf.float32, [64, 8])
w = tf.Variable(tf.zeros([8, 1]))
noise = tf.random.uniform([64, 1])  # a random op in the loss, as nce_loss samples classes
loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - noise))
train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    data = np.ones((64, 8), np.float32)
    for step in range(15000):  # 6,000 ran out before the what-if's first variant block once
        sess.run([train, loss], feed_dict={x: data})
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_native_callable_of_a_random_loss_is_checked_by_its_shapes(tmp_path: Path) -> None:
    # word2vec's nce_loss samples at every run: the callable what-if failed with "the fetched
    # tensors differ from session.run's", as two session.run calls differ as much.
    script = write(tmp_path, "tf1_random.py", TF1_RANDOM_LOSS)
    _, found, _ = _whatifs(tmp_path, "--phases", "timed,hooks,whatif", str(script))
    x = found["tf1_callable"]
    assert x["status"] in ("ok", "partial"), x
    assert "are random: two session.run calls on the same feeds differ" in x["results_check"], x


TF1_ITERATOR_EPOCHS = """
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
data = tf.data.Dataset.from_tensor_slices(np.ones((64 * 40, 8), np.float32)).batch(64)
iterator = tf.data.Iterator.from_structure(
    tf.data.get_output_types(data), tf.data.get_output_shapes(data)
)
init = iterator.make_initializer(data)
x = iterator.get_next()
w = tf.Variable(tf.zeros([8, 1]))
loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
epochs = 0
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for epoch in range(150):
        sess.run(init)
        try:
            while True:
                sess.run([train, loss])
        except tf.errors.OutOfRangeError:
            epochs += 1
print("epochs", epochs)
"""


@pytest.mark.tf
@pytest.mark.slow
def test_a_native_callable_leaves_an_iterators_end_of_epoch_to_the_script(tmp_path: Path) -> None:
    # CS20's logistic regression reads its batches from an iterator in the graph and ends
    # each epoch on OutOfRangeError: the callable what-if ended in "could not be applied:
    # OutOfRangeError: End of sequence".
    script = write(tmp_path, "tf1_epochs.py", TF1_ITERATOR_EPOCHS)
    w, found, stdout = _whatifs(tmp_path, "--phases", "timed,hooks,whatif", str(script))
    x = found["tf1_callable"]
    assert x["status"] in ("ok", "partial") and not x["error"], x
    assert "OutOfRangeError" not in json.dumps(x)
    assert "epochs 150" in stdout  # every epoch ended where the script ends it


def test_fetched_summaries_compare_as_bytes_beside_the_numbers() -> None:
    # A TF1 conv net fetching its merged summaries with the loss: the callable what-if ended
    # in "ValueError: could not convert string to float: b'\n\x15\n\x0esummaries/loss...'".
    import numpy as np

    from profiler.capture.whatifs import _max_difference, _scale

    summary = np.asarray(b"\n\x15\n\x0esummaries/loss\x15\x0b\xf1")
    loss = np.float32(-2.5)
    assert _max_difference([summary, loss], [summary, np.float32(-2.5)]) == 0.0
    assert _max_difference([summary, loss], [summary, np.float32(-2.0)]) == 0.5
    assert _max_difference([summary, loss], [np.asarray(b"other"), loss]) == float("inf")
    assert _scale([summary, loss]) == 2.5 and _scale([summary]) == 1.0

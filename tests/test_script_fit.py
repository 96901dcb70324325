"""A script's phases fit the steps it has; unknown is not zero; fixes fit the script.

Every test runs the real command line on a small script in a folder of its own, with the
profiler's default options unless the test is about one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_script_run import DATA, cli, only_run, phase, workload, write

#: A numpy loop marking N steps of ~2 ms each (numpy: timed, sampled and lines apply).
MARKED = """
import time

import numpy as np

import profiler

x = np.arange(2_000, dtype=float)
for i in range({n}):
    with profiler.step():
        t = time.perf_counter()
        while time.perf_counter() - t < 0.002:
            x = x * 0.999 + 1.0
print("done", float(x[0]))
"""
NUMPY_PHASES = {"timed", "sampled", "lines"}


def _statuses(w: dict) -> dict[str, str]:
    return {p["name"]: p["status"] for p in w["phases"]}


def test_a_31_step_script_gets_its_steps_measured_and_says_what_it_missed(tmp_path: Path):
    script = write(tmp_path, "short.py", MARKED.format(n=31))
    # --repeat 0: no second run (by default one fits the missed phases in, as tested below).
    out = cli(tmp_path, "--repeat", "0", str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    s = w["script"]
    assert s["steps"] == 31
    # The warm-up shrinks (a few steps, not 50), so the timed window gets steps.
    assert 3 <= w["one_off"]["warmup_steps"] <= 20
    assert phase(w, "timed")["status"] == "ok" and phase(w, "timed")["steps"] > 0
    missed = [p["name"] for p in w["phases"] if p["missed"]]
    # (the what-if phase applies to numpy scripts too: numpy_float32)
    assert missed and set(missed) <= NUMPY_PHASES | {"whatif"}
    assert s["missed"] == missed
    assert "--repeat 1" in s["message"] and all(m in s["message"] for m in missed)
    assert "--repeat 1" in out.stdout


def test_repeat_measures_the_missed_phases_in_more_runs_of_the_script(tmp_path: Path):
    script = write(tmp_path, "short.py", MARKED.format(n=31))
    out = cli(tmp_path, "--repeat", "2", str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    assert {n for n, st in _statuses(w).items() if st == "ok"} == NUMPY_PHASES, w["phases"]
    # Only a sampled phase short of samples may still be thin (31 steps: 25 main-thread
    # samples once beside another test process), and its reason says so.
    thin = [p for p in w["phases"] if p["missed"]]
    assert all(p["name"] == "sampled" and "fewer than the 50" in p["reason"] for p in thin), thin
    runs = w["script"]["runs"]
    assert [r["repeat"] for r in runs][:2] == [0, 1] and all(r["steps"] == 31 for r in runs)
    repeated = [p for p in w["phases"] if p["repeat"] > 0]
    assert repeated and all("measured in repeat" in p["reason"] for p in repeated)
    # A repeat's artefacts live in its own folder, named relative to the workload's.
    sampled = phase(w, "sampled")
    if sampled["repeat"]:
        assert all(a.startswith(f"repeat-{sampled['repeat']}/") for a in sampled["artefacts"][:2])


def test_max_steps_shorter_than_the_default_windows_fits_every_phase(tmp_path: Path):
    script = write(tmp_path, "long.py", MARKED.format(n=100_000))
    out = cli(tmp_path, "--max-steps", "80", str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    assert w["script"]["ended"] == "max_steps" and w["script"]["steps"] == 80
    assert {n for n, st in _statuses(w).items() if st == "ok"} == NUMPY_PHASES, w["phases"]
    assert w["script"]["missed"] == []
    plan = w["script"]["plan"]
    assert plan["order"][:2] == ["timed", "sampled"]
    windows = sum(p["window"] + p["rewarm"] + p["extra"] for p in plan["phases"].values())
    assert windows + plan["steps_before"] <= 80


def test_a_numpy_script_is_never_offered_a_tensorflow_fix(tmp_path: Path):
    out = cli(tmp_path, str(DATA / "markers_numpy.py"))
    assert out.returncode == 0, out.stderr
    run = only_run(tmp_path)
    w = workload(run)
    assert w["script"]["detection"]["framework"] == "numpy"
    text = " ".join(
        d["message"] + d["fix"]
        for d in __import__("json").loads((run / "summary.json").read_text())["diagnoses"]
    )
    for tf_only in ("tf.function", "session.run", "tf.while_loop", "steps_per_execution"):
        assert tf_only not in text and tf_only not in out.stdout.split("report:")[0]
    # Its split is on the terminal, under the table.
    assert "A step of markers_numpy.py takes" in out.stdout


@pytest.mark.tf
@pytest.mark.slow
def test_a_keras_fit_with_defaults_runs_every_phase_and_measures_its_kernels(tmp_path: Path):
    out = cli(tmp_path, str(DATA / "keras_fit.py"))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    assert w["script"]["steps"] == 160
    statuses = _statuses(w)
    # Every phase; the what-ifs too where a second run of the script had room for them.
    assert {n for n, st in statuses.items() if st == "ok"} - {"whatif"} == {
        "timed",
        "sampled",
        "framework",
        "hooks",
        "lines",
    }, w["phases"]
    att = w["attribution"]
    assert att["not_measured"] == {} and att["typical_us"]["compute"] > 0
    # The start-up capture never used --native on a script that imports TensorFlow.
    assert all(not c["native"] for c in w["script"]["startup"]["captures"])
    # Fit's own total (8 epochs x 20 batches) sized the plan.
    assert w["script"]["plan"]["available"] is not None


@pytest.mark.tf
def test_unknown_is_not_zero_without_the_framework_phase(tmp_path: Path):
    out = cli(
        tmp_path,
        "--tf1",
        "--max-steps",
        "400",
        "--phases",
        "timed,hooks",
        str(DATA / "seed000_tf1.py"),
    )
    assert out.returncode == 0, out.stderr
    run = only_run(tmp_path)
    w = workload(run)
    att = w["attribution"]
    assert att["typical_us"]["compute"] is None and att["share"]["compute"] is None
    assert att["overhead_share"] is None
    assert "framework phase" in att["not_measured"]["compute"]
    assert att["typical_us"]["feed_fetch"] > 0  # the hooks measured the Python side
    text = out.stdout + (run / "report.html").read_text()
    assert "kernels take 0.0" not in text and "0.0 µs of kernels" not in text
    assert "not measured" in text and "% of each" not in out.stdout


@pytest.mark.tf
def test_the_start_up_capture_leaves_native_sampling_when_tensorflow_is_imported(tmp_path):
    script = write(
        tmp_path,
        "late_import.py",
        """
        import time

        time.sleep(1.0)  # no loop: nothing for the automatic steps to choose
        import importlib

        tf = importlib.import_module("tensorflow")  # not visible to a static import check
        print(float(tf.reduce_sum(tf.ones(3))))
        """,
    )
    out = cli(tmp_path, "--phases", "timed,sampled", str(script))
    assert out.returncode == 0, out.stderr
    startup = workload(only_run(tmp_path))["script"]["startup"]
    assert startup["switched_at"] == "tensorflow"
    natives = [c["native"] for c in startup["captures"]]
    assert natives[0] is True and natives[-1] is False
    assert startup["blocked_ms"] < 5_000


@pytest.mark.tf
def test_a_fit_on_a_batched_dataset_counts_the_datasets_batch_as_its_samples(tmp_path: Path):
    # fit ignores batch_size for a dataset: the samples of a step are the dataset's batch (64),
    # not fit's default 32 (a Keras example's windowed dataset of 256 read as 32).
    script = write(
        tmp_path,
        "ds_fit.py",
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "x = np.random.default_rng(0).normal(size=(4096, 8)).astype('float32')\n"
        "y = x.sum(axis=1, keepdims=True)\n"
        # A filter leaves its length unknown to fit (a TFRecordDataset's is too).
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).filter(lambda a, b: True)\n"
        "ds = ds.prefetch(2)\n"
        "model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])\n"
        "model.compile('sgd', 'mse')\n"
        # One callback, not in a list, as TensorFlow's audio tutorial passes it.
        "stop = tf.keras.callbacks.EarlyStopping(patience=5)\n"
        "model.fit(ds, epochs=3, verbose=0, validation_data=ds.take(8), callbacks=stop)\n",
    )
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", "--no-progress", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    w = workload(only_run(tmp_path))
    assert w["script"]["fit"]["batch_size"] == 64 and w["script"]["fit"]["batch_source"] == (
        "dataset"
    )
    assert w["work"]["samples_per_step"] == 64, w["work"]
    assert w["script"]["fit"]["callbacks"] == ["EarlyStopping"], w["script"]["fit"]
    # fit's validation at each epoch's end is timed, each run (the first traces its function).
    timed = w["script"]["fit"]["validations_ns"]
    assert len(timed) == 3 and all(v > 0 for v in timed), timed
    # The timed window alone ran: every validation was the script's as written.
    assert "validations_altered" not in w["script"]["fit"], w["script"]["fit"]
    # Its epochs' length, unknown to fit, is the first epoch's batches.
    fit = w["script"]["fit"]
    # One model: its first validation (index 0) is the one that traced.
    assert fit["first_validations"] == [0], fit
    assert fit["steps_per_epoch"] == 64 and fit["steps_per_epoch_seen"] is True, fit


@pytest.mark.tf
def test_validations_run_while_a_phase_instruments_the_loop_are_marked_not_the_scripts(
    tmp_path: Path,
):
    # A conv net's 0.13 s validation read 0.2-2.9 s during the what-ifs and the line
    # profiler, and was called 45% of its training: those are marked and left out.
    script = write(
        tmp_path,
        "val_fit.py",
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "x = np.random.default_rng(0).normal(size=(320, 8)).astype('float32')\n"
        "y = x.sum(axis=1, keepdims=True)\n"
        "model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])\n"
        "model.compile('sgd', 'mse')\n"
        "model.fit(x, y, batch_size=64, epochs=60, verbose=0, validation_data=(x[:64], y[:64]))\n",
    )
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed,hooks", "--no-progress", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    fit = workload(only_run(tmp_path))["script"]["fit"]
    timed, altered = fit["validations_ns"], fit.get("validations_altered") or []
    # 5-batch epochs: the hooks' window holds epoch ends; the warm-up and the steps after the
    # schedule are the script's as written.
    assert len(timed) == 60 and 0 < len(altered) < 60, (len(timed), altered)
    assert all(0 <= i < 60 for i in altered) and altered == sorted(set(altered)), altered


def _timed_fit(tmp_path: Path, script: Path) -> tuple[dict, list[dict]]:
    """The script profiled in its timed window only: its ``script.fit`` and its diagnoses."""
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", "--no-progress", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    run = only_run(tmp_path)
    found = json.loads((run / "summary.json").read_text())["diagnoses"]
    return workload(run)["script"]["fit"], found


@pytest.mark.tf
def test_fit_called_on_one_sample_again_and_again_is_named_with_its_calls(tmp_path: Path):
    # A DQN's replay fits each transition on its own: every fit call is one batch, and its
    # per-call set-up (~60 ms here against ~1 ms for train_on_batch) is the loop.
    script = write(
        tmp_path,
        "fit_per_sample.py",
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "x = np.random.default_rng(0).normal(size=(40, 4)).astype('float32')\n"
        "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])\n"
        "model.compile('adam', 'mse')\n"
        "for i in range(40):\n"
        "    model.fit(x[i : i + 1], x[i : i + 1, :2], epochs=1, verbose=0)\n",
    )
    fit, found = _timed_fit(tmp_path, script)
    assert fit["calls"] == fit["one_batch_calls"] == 40 and fit["ns"] > 0, fit
    assert fit["models"] == 1, fit
    # Each call timed, the calls' sum the whole.
    assert len(fit["call_ms"]) == 40 and abs(sum(fit["call_ms"]) - fit["ns"] / 1e6) < 1.0
    (d,) = [d for d in found if d["rule"] == "fit_per_batch"]
    assert "model.fit 40 times on one batch each" in d["message"], d
    assert "model.train_on_batch(x, y)" in d["fix"]
    # Not fit's per-batch machinery: steps_per_execution cannot help a one-batch call.
    assert not [d for d in found if d["rule"] == "overhead_bound_keras"]


@pytest.mark.tf
def test_a_new_model_fit_in_each_trial_is_named_with_its_traces_and_one_model_reset(
    tmp_path: Path,
):
    # A memory-leak report's loop (tensorflow#41973): a new model built, compiled and fit in
    # each iteration. Each one's first batch traces its train function (~70% of the loop):
    # "a trace is paid once ... Nothing to change" was said of it.
    script = write(
        tmp_path,
        "trials.py",
        "import numpy as np\n"
        "from tensorflow import keras\n"
        "for trial in range(8):\n"
        "    inputs = keras.Input(shape=(10,))\n"
        "    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "    model.fit(np.random.rand(256, 10), np.random.rand(256), verbose=0)\n",
    )
    fit, found = _timed_fit(tmp_path, script)
    assert fit["models"] == fit["calls"] == 8, fit
    assert len(fit["call_arch"]) == 8 and len(set(fit["call_arch"])) == 1, fit["call_arch"]
    (d,) = [d for d in found if d["rule"] == "model_per_fit"]
    assert (
        "fit trained 8 new models, once each, and each traced its new train function"
        in (d["message"])
    ), d
    assert d["fix"].startswith("The 8 models have one architecture: build and compile one")
    assert "model.set_weights(w0)" in d["fix"], d
    assert not [d for d in found if d["rule"] == "one_off_tracing"], found

    from profiler.capture.script.detect import architecture

    def made(units: int) -> str:
        inputs = keras.Input(shape=(10,))
        return architecture(keras.Model(inputs, keras.layers.Dense(units)(inputs)))

    import keras

    assert made(1) == made(1) != made(2) and architecture(object()) == ""


@pytest.mark.tf
def test_a_pydatasets_batch_is_its_batch_size_attribute_where_it_keeps_one() -> None:
    # A blog's data generator batching 64 in __getitem__ read as fit's default 32.
    import keras
    import tensorflow as tf

    from profiler.capture.script.detect import _fed_batch

    class Generator(keras.utils.PyDataset):
        def __init__(self, batch_size: int, **kwargs) -> None:
            super().__init__(**kwargs)
            if batch_size:
                self.batch_size = batch_size

        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int):
            raise AssertionError("the batch size is read without a batch being made")

    assert _fed_batch(Generator(64, workers=2)) == 64
    assert _fed_batch(Generator(0)) is None
    assert _fed_batch(tf.data.Dataset.range(10).batch(16).prefetch(1)) == 16
    assert _fed_batch(tf.data.Dataset.range(10)) is None


@pytest.mark.tf
def test_the_scripts_own_batch_callbacks_are_told_from_keras_own() -> None:
    # steps_per_execution=k calls batch methods once every k batches: a callback evaluating
    # every 20 batches would then count executions (the fix says so where one is given).
    import keras

    from profiler.capture.script.detect import _batch_hooks

    class EveryN(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            pass

    class Later(EveryN):
        pass

    class EpochsOnly(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            pass

    assert _batch_hooks(EveryN()) and _batch_hooks(Later())
    assert not _batch_hooks(EpochsOnly())
    assert not _batch_hooks(keras.callbacks.TensorBoard("logs", update_freq="batch"))
    assert not _batch_hooks(keras.callbacks.ProgbarLogger())
    # A LambdaCallback given a batch method (weights kept at every batch end) is the script's.
    assert _batch_hooks(keras.callbacks.LambdaCallback(on_batch_end=lambda b, logs: None))
    assert not _batch_hooks(keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: None))


@pytest.mark.tf
def test_a_tensorboard_callbacks_settings_are_read_as_keras_keeps_them() -> None:
    # Keras 3's defaults write each epoch's scalars only (the fix names nothing to set then).
    import keras

    from profiler.capture.script.detect import _tensorboard_settings

    assert _tensorboard_settings([keras.callbacks.CSVLogger("x.csv")]) == {}
    assert _tensorboard_settings([keras.callbacks.TensorBoard("logs")]) == {
        "tb_update_freq": "epoch",
        "tb_profiling": False,
        "tb_write_images": False,
        "tb_embeddings_freq": 0,
    }
    busy = keras.callbacks.TensorBoard("logs", update_freq="batch", profile_batch=(2, 4))
    got = _tensorboard_settings([busy])
    assert got["tb_update_freq"] == 1 and got["tb_profiling"] is True


@pytest.mark.tf
def test_a_model_checkpoints_settings_are_read_as_keras_keeps_them() -> None:
    import keras

    from profiler.capture.script.detect import _checkpoint_settings

    assert _checkpoint_settings([keras.callbacks.CSVLogger("x.csv")]) == {}
    ck = keras.callbacks.ModelCheckpoint("ck_{epoch}.weights.h5", save_weights_only=True)
    assert _checkpoint_settings([ck]) == {
        "ckpt_weights_only": True,
        "ckpt_best_only": False,
        "ckpt_save_freq": "epoch",
    }
    often = keras.callbacks.ModelCheckpoint("m.keras", save_best_only=True, save_freq=50)
    assert _checkpoint_settings([often])["ckpt_save_freq"] == 50


@pytest.mark.tf
def test_a_model_keras_will_not_compile_with_xla_gets_no_xla_what_if() -> None:
    # The image classification tutorial's augmentation layers inside the model: Keras keeps
    # jit_compile False (with a warning), and the what-if measured the script against itself.
    import warnings

    import keras

    from profiler.capture.whatifs import _jit_refused

    aug = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.RandomZoom(0.1), keras.layers.Flatten()]
    )
    aug.compile("sgd", "mse")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        why = _jit_refused(aug)
    assert why == (
        "Keras does not compile this model with XLA (its layers RandomZoom do not support "
        "XLA): jit_compile=True runs without it"
    )
    assert not said and aug.jit_compile is False  # no warning let through, the model as it was
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    plain.compile("sgd", "mse")
    assert _jit_refused(plain) is None and plain.jit_compile is False

"""Quiet by default (``profiler.capture.quiet``): the TensorFlow lines the profiler's own calls
cause stay out of the script's output; the script's own output passes unchanged.

The table is checked row by row on lines TF 2.21 wrote here, the window and the runner's tee on
bytes written by hand; then the real command line and a real ``profiler.profile()`` block run
TensorFlow (``tf``).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler.capture import quiet
from profiler.model import OK, WorkloadTrace
from profiler.processes import runner
from tests.conftest import python_env

#: One line each row of ``PROFILER_LINES`` is for, as TF 2.21 writes it (in row order).
SEEN = (
    "W0000 00:00:1796176897.867568    9439 session_manager.cc:55] delay_ms expects an i value.",
    "I0000 00:00:1796176897.867584    9439 profiler_session.cc:132] Profiler session started.",
    "I0000 00:00:1796176897.939253    9439 save_profile.cc:150] Collecting XSpace to repository: "
    "/tmp/r/tensorboard/x/plugins/profile/2026_12_02_02_01_37/vm.xplane.pb",
    "W0000 00:00:1796176936.620248    9845 xplane_to_step_stats.cc:84] GPU trace was not "
    "collected.",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "WARNING:tensorflow:From /v/lib/python3.11/site-packages/tensorflow/python/profiler/internal/"
    "flops_registry.py:453: tensor_shape_from_node_def_name (from tensorflow.python.framework."
    "graph_util_impl) is deprecated and will be removed in a future version.",
)
FLOPS_MORE = (
    "Instructions for updating:",
    "This API was designed for TensorFlow v1. See https://www.tensorflow.org/guide/migrate for "
    "instructions on how to migrate your code to TensorFlow v2.",
)
#: Lines like them that are not the profiler's: kept.
NOT_OURS = (
    "W0000 00:00:1700000000.000001    4242 my_model.cc:42] the script's own native-looking line",
    "I0000 00:00:1796176889.328603    9193 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "Profiler session started.",
    "WARNING:tensorflow:From train.py:3: my_helper (from x) is deprecated",
    "Instructions for updating:",
)
#: What the output must not show (a profiler-caused line of each kind).
OURS = ("session_manager.cc", "expects an i value", "profiler_session.cc", "save_profile.cc")
OURS += ("xplane_to_step_stats.cc", "flops_registry.py")


@pytest.mark.parametrize("row", range(len(quiet.PROFILER_LINES)))
def test_each_row_matches_its_line_and_no_other(row):
    rule = quiet.PROFILER_LINES[row]
    assert rule.pattern.search(SEEN[row])
    assert [i for i, line in enumerate(SEEN) if rule.pattern.search(line)] == [row]
    assert not any(rule.pattern.search(line) for line in NOT_OURS)


def test_tf_older_log_format_matches_too():
    line = (
        "2024-01-02 03:04:05.678901: I tensorflow/tsl/profiler/lib/profiler_session.cc:104] "
        "Profiler session initializing."
    )
    assert quiet.LineFilter().drops(line)


def test_a_records_further_lines_go_only_right_after_it():
    f = quiet.LineFilter()
    lines = [SEEN[5], *FLOPS_MORE, "Instructions for updating:", "mine"]
    assert [f.drops(line) for line in lines] == [True, True, True, False, False]
    f = quiet.LineFilter()
    assert [f.drops(line) for line in ("mine", *FLOPS_MORE)] == [False, False, False]


def test_split_keeps_bytes_as_they_are():
    data = "\n".join([NOT_OURS[0], SEEN[1], "héllo \udcff", SEEN[0], "tail"]).encode(
        "utf-8", errors="surrogateescape"
    )
    kept, dropped = quiet.LineFilter().split(data)
    assert kept == (NOT_OURS[0] + "\nhéllo \udcff\ntail").encode("utf-8", "surrogateescape")
    assert dropped == (SEEN[1] + "\n" + SEEN[0] + "\n").encode()


def _run_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env={**python_env(), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


WINDOW = """
    import faulthandler, logging, os, sys, threading, warnings
    from pathlib import Path
    from profiler.capture import quiet

    faulthandler.enable()
    folder = Path("w")
    print("before", file=sys.stderr)
    with quiet.held(folder):
        os.write(2, {ours!r}.encode() + b"\\n")
        os.write(2, b"the script's line, written meanwhile\\n")
        logging.getLogger("tensorflow").warning("a record of our call")
        warnings.warn("a warning of our call")
        t = threading.Thread(target=lambda: warnings.warn("the script's own warning"))
        t.start(); t.join()
        with quiet.held(folder):  # nested: the same window
            os.write(2, b"nested\\n")
        {inside}
    print("after", file=sys.stderr)
"""


def test_a_window_keeps_the_scripts_bytes_and_logs_ours(tmp_path):
    p = _run_python(WINDOW.format(ours=SEEN[1], inside="pass"), tmp_path)
    assert p.returncode == 0, p.stderr
    err = p.stderr.splitlines()
    assert err[0] == "before" and err[-1] == "after"
    assert "the script's line, written meanwhile" in err
    assert "nested" in err
    assert any("the script's own warning" in line for line in err)
    assert not any(s in p.stderr for s in ("Profiler session", "of our call"))
    log = (tmp_path / "w" / quiet.LOG_NAME).read_text()
    assert SEEN[1] in log
    assert "WARNING:tensorflow:a record of our call" in log
    assert "UserWarning: a warning of our call" in log
    assert sorted(os.listdir(tmp_path / "w")) == [quiet.LOG_NAME]


def test_a_crash_inside_a_window_still_dumps_to_stderr(tmp_path):
    p = _run_python(WINDOW.format(ours=SEEN[1], inside="faulthandler._sigsegv()"), tmp_path)
    assert p.returncode < 0
    assert "Fatal Python error: Segmentation fault" in p.stderr
    assert 'File "<string>"' in p.stderr.split("Fatal Python error")[1]
    # What fd 2 got inside the window is on disk.
    held = (tmp_path / "w" / quiet.HELD_NAME).read_text()
    assert "the script's line, written meanwhile" in held


def test_the_tee_drops_whole_native_lines_from_the_terminal_only():
    r, w = os.pipe()
    log, terminal = io.BytesIO(), io.BytesIO()
    sink = SimpleNamespace(buffer=terminal)  # what _tee writes to of sys.stderr
    chunks = [
        b"progress 10%",  # a piece of a line: passed at once
        b" 20%\n" + SEEN[1].encode() + b"\n",
        NOT_OURS[0].encode() + b"\n" + SEEN[5].encode() + b"\n",
    ]

    def write() -> None:
        for c in chunks:
            os.write(w, c)
        os.close(w)

    t = threading.Thread(target=write)
    t.start()
    with os.fdopen(r, "rb") as pipe:
        runner._tee(pipe, log, sink, quiet.LineFilter(quiet.TEE_LINES))
    t.join()
    assert log.getvalue() == b"".join(chunks)
    # The flops record is a Python one: a script that counts flops itself prints it too.
    assert terminal.getvalue() == (
        b"progress 10% 20%\n" + NOT_OURS[0].encode() + b"\n" + SEEN[5].encode() + b"\n"
    )


def test_the_scripts_unfinished_last_line_is_ended_on_the_terminal_only():
    # Keras's last progress bar ran into the profiler's table: "... 146ms/step workload".
    r, w = os.pipe()
    log, terminal = io.BytesIO(), io.BytesIO()
    sink = SimpleNamespace(buffer=terminal)
    os.write(w, b"epoch 1\r[=====] 146ms/step")
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        runner._tee(pipe, log, sink)
    assert log.getvalue() == b"epoch 1\r[=====] 146ms/step"
    assert terminal.getvalue() == b"epoch 1\r[=====] 146ms/step\n"


# --- TensorFlow for real -----------------------------------------------------------------------

SCRIPT = """
import sys
import warnings

import tensorflow as tf

x = tf.random.normal((64, 8), seed=0)
w = tf.Variable(tf.zeros((8, 1)))


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(x @ w - 1.0))
    w.assign_sub(0.1 * tape.gradient(loss, w))
    return loss


print({own!r}, file=sys.stderr, flush=True)
warnings.warn("the script's own warning")
tf.get_logger().warning("the script's own tf warning")
for _ in range(1500):
    loss = train_step()
print(f"QUIET-LOOP done loss={{float(loss):.3f}}")
# The script counts flops itself: TF's deprecation warning is its own then.
print("SCRIPT-FLOPS", file=sys.stderr, flush=True)
opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
opts["output"] = "none"
graph = train_step.get_concrete_function().graph
tf.compat.v1.profiler.profile(graph, options=opts)
"""


PROFILER_RUN = (sys.executable, "-m", "profiler", "run", "--out", "runs", "--no-progress")


@pytest.mark.tf
@pytest.mark.slow
def test_the_command_line_shows_the_scripts_output_and_not_the_profilers(tmp_path):
    """~10 s: timed and framework phases are enough for every line the profiler causes. A
    timed window of 300 steps leaves the framework window room in the script's 1,500 steps (by
    time, the window took 1,480 to 2,313 of them here, and the framework phase was measured in
    a second run of the script, whose trace this test does not read)."""
    (tmp_path / "train.py").write_text(SCRIPT.format(own=NOT_OURS[0]))
    p = subprocess.run(
        [*PROFILER_RUN, "--phases", "timed,framework", "--steps", "300", "train.py"],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    terminal = p.stdout + p.stderr
    assert "QUIET-LOOP done" in p.stdout
    assert NOT_OURS[0] in p.stderr
    assert "UserWarning: the script's own warning" in p.stderr
    assert "WARNING:tensorflow:the script's own tf warning" in p.stderr
    # The script's own flops count warns once a run (the profiler may run it again for a phase
    # it missed): the profiler's count neither printed that warning nor used it up.
    runs = p.stderr.count(NOT_OURS[0])
    assert runs >= 1
    assert p.stderr.count("flops_registry.py") == runs
    assert p.stderr.count("Instructions for updating:") == runs
    last = ""
    for line in p.stderr.splitlines():
        if line in (NOT_OURS[0], "SCRIPT-FLOPS"):
            last = line
        elif "flops_registry.py" in line:
            assert last == "SCRIPT-FLOPS", "a flops warning before the script's own count"
    assert not [s for s in OURS if s != "flops_registry.py" and s in terminal]
    (wdir,) = (tmp_path / "runs" / "latest" / "workloads").iterdir()
    fw = WorkloadTrace.load(wdir / "model.json.gz").phase("framework")
    assert fw is not None and fw.status == OK, fw
    assert fw.data.flops_per_step, "the flops count ran"


BLOCK = """
import sys
import numpy as np
import tensorflow as tf
import profiler

{setup}
print("BLOCK-START", file=sys.stderr, flush=True)
with profiler.profile(out="runs", phases=["timed", "framework"]) as p:
    # Steps enough for both windows at any speed: the timed window aims at 0.5 s and a 250 us
    # step (a quiet machine) took 1,988 of them.
    for i in range(6000):
        {step}
        if i == 100:
            print({own!r}, file=sys.stderr, flush=True)
print("BLOCK-END", p.summary.status, file=sys.stderr, flush=True)
"""
TF2 = """
x = tf.constant(np.linspace(0, 1, 256, dtype=np.float32)[:, None])
w = tf.Variable([[0.0]])


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((3 * x + 1 - x @ w) ** 2)
    w.assign_sub(0.1 * tape.gradient(loss, w))
"""
TF1 = """
tf.compat.v1.disable_eager_execution()
X = tf.compat.v1.placeholder(tf.float32, shape=(256, 1))
w = tf.Variable([[0.0]])
loss = tf.reduce_mean((3 * X + 1 - X @ w) ** 2)
train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
sess = tf.compat.v1.Session()
sess.run(tf.compat.v1.global_variables_initializer())
xd = np.linspace(0, 1, 256, dtype=np.float32)[:, None]
"""
BLOCKS = {
    "tf_function": (TF2, "train_step()", ("session_manager.cc", "Collecting XSpace")),
    # TF1: FULL_TRACE steps after the window, 5 lines each.
    "tf1_session": (TF1, "sess.run(train, {X: xd})", ("GPU trace was not collected",)),
}


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("kind", BLOCKS)
def test_a_profile_block_shows_none_of_the_profilers_tf_lines(tmp_path, kind):
    """~20 s each: in the user's own process, where TF's C++ INFO lines are on."""
    setup, step, kept = BLOCKS[kind]
    code = BLOCK.format(setup=setup, step=step, own=NOT_OURS[0])
    p = _run_python(code, tmp_path, TF_CPP_MIN_LOG_LEVEL="0")  # every C++ line TF writes shows
    assert p.returncode == 0, p.stderr
    err = p.stderr.splitlines()
    start, end = err.index("BLOCK-START"), err.index(f"BLOCK-END {OK}")
    assert err[start + 1 : end] == [NOT_OURS[0]], "\n".join(err[start:end])
    (wdir,) = (tmp_path / "runs" / "latest" / "workloads").iterdir()
    log = (wdir / quiet.LOG_NAME).read_text()
    for text in ("Profiler session started.", *kept):
        assert text in log
    assert not (wdir / quiet.HELD_NAME).exists()

"""TensorFlow's allocator figures in a script's memory record (issue 26, item 1).

Truths, known by construction: the script keeps one 1,000,000-float32 tensor (4,000,000 bytes)
a step for 40 steps, 160 MB at its end; TensorFlow 2.21's CPU allocator counts a 4 MB tensor as
4,000,000 bytes (measured here without the profiler). The second script sets TensorFlow's
threads after ~1.5 s of probes, which raises once TensorFlow's context has started: the
profiler must not start it.
"""

from __future__ import annotations

import sys

import pytest

from profiler.capture.memory_allocator import NO_TENSORFLOW, AllocatorProbe
from tests.test_script_run import cli, only_run, workload, write

KEEPS = """
import time
import tensorflow as tf

kept = []
for step in range(40):
    kept.append(tf.random.normal([1_000_000]))  # 4,000,000 bytes a step
    time.sleep(0.03)
print(len(kept))
"""

LATE_THREADS = """
import time
import tensorflow as tf

time.sleep(1.5)  # the memory thread probes every 0.5 s meanwhile
tf.config.threading.set_intra_op_parallelism_threads(1)  # raises once the context started
w = tf.Variable(1.0)
for step in range(200):
    w.assign_add(0.1)
print(float(w))
"""


def _run(tmp_path, body):
    script = write(tmp_path, "loop.py", body)
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", "--no-progress", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    return workload(only_run(tmp_path)), out.stdout


#: What TensorFlow says where its CPU allocator keeps no figures: TensorFlow 2.21 keeps them
#: with oneDNN's optimisations on (its default on some CPUs, not on others: one machine here
#: answered, the next raised this) or ``TF_ENABLE_ONEDNN_OPTS=1``.
NO_CPU_STATS = "Allocator stats not available for device 'CPU:0'"


@pytest.mark.tf
def test_the_cpu_allocator_holds_the_kept_tensors(tmp_path):
    w, stdout = _run(tmp_path, KEEPS)
    if NO_CPU_STATS in w["memory"]["allocator_why"]:
        # Read, and this TensorFlow said it keeps none: said as not read, never as zero.
        assert w["memory"]["allocator"] == [], w["memory"]
        assert f"TensorFlow's allocator: not read (CPU:0: ValueError: {NO_CPU_STATS})" in stdout
        return
    (cpu,) = [a for a in w["memory"]["allocator"] if a["device"] == "CPU:0"]
    kept_mb = 40 * 4_000_000 / 2**20
    # Everything kept is in use at the end; the allocator's own peak holds it too.
    assert kept_mb <= cpu["last_mb"] <= kept_mb + 40, cpu
    assert cpu["peak_mb"] >= cpu["last_mb"] and cpu["reads"] >= 2
    assert w["memory"]["allocator_why"] == ""
    assert "TensorFlow's allocator (on CPU it counts its buffers of 256 KB and more" in stdout
    assert "measured with TensorFlow 2.21) on CPU:0: " in stdout


@pytest.mark.tf
def test_the_probe_never_starts_tensorflows_context(tmp_path):
    w, stdout = _run(tmp_path, LATE_THREADS)
    # The script ran to its end (1 + 200 x 0.1 in float32): its threads could still be set.
    assert any(line.startswith("21.0000") for line in stdout.splitlines()), stdout[-2000:]
    # Read once the script had started the context: figures, or TensorFlow's own answer that
    # its CPU allocator keeps none (never "the context was never started").
    why = w["memory"]["allocator_why"]
    assert w["memory"]["allocator"] or NO_CPU_STATS in why, why


def test_a_script_without_tensorflow_reads_nothing_and_says_why(monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    probe = AllocatorProbe()
    probe.read(1, 1)
    rec = probe.record()
    assert rec["devices"] == {} and rec["reads"] == 0 and rec["why"] == NO_TENSORFLOW

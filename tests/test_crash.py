"""Reading where a process crashed in native code from Python's faulthandler dump.

The dump in tests/data is the stderr of a real crash: a two-worker MultiWorkerMirroredStrategy
job's task 1, which TensorFlow 2.21 killed (SIGSEGV) inside tf.profiler.experimental.stop while
the framework phase ended its window (paths shortened)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from profiler.model import FAILED
from profiler.processes import crash, runner, workers

DUMP = Path(__file__).parent / "data" / "faulthandler_profiler_stop.txt"


def test_a_crash_in_the_profilers_stop_is_tensorflows_and_the_framework_phases() -> None:
    c = crash.parse(DUMP.read_text())
    assert c is not None
    assert c.what == "Segmentation fault"
    assert str(c.frames[0]) == "stop (tensorflow/python/profiler/profiler_v2.py:149)"
    assert c.in_tensorflow and c.phase == "framework"
    assert c.where() == (
        "in stop (tensorflow/python/profiler/profiler_v2.py:149), called by the profiler's "
        "framework phase"
    )
    # Only the crashing thread's frames: the main thread's (driver.py) are not among them.
    assert not any(f.path.endswith("driver.py") for f in c.frames)
    assert "Extension modules" not in c.dump()


def test_the_job_is_run_again_only_for_a_crash_inside_tensorflows_profiler() -> None:
    tf_crash = crash.parse(DUMP.read_text())
    script_crash = crash.parse(
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
        '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at\n'
        '  File "/home/u/train.py", line 7 in <module>\n'
    )
    assert script_crash is not None and script_crash.phase is None
    assert (
        script_crash.where() == "in string_at (ctypes/__init__.py:519), from <module> (train.py:7)"
    )

    def outcome(native: crash.NativeCrash | None) -> runner.WorkloadOutcome:
        return runner.WorkloadOutcome(spec=None, slug="w", status=FAILED, trace=None, native=native)  # type: ignore[arg-type]

    assert workers.profiler_crash([outcome(None), outcome(tf_crash)]) == 1
    assert workers.profiler_crash([outcome(None), outcome(script_crash)]) is None
    assert workers.profiler_crash([outcome(None), outcome(None)]) is None


def test_a_real_dump_of_a_crash_in_a_thread_names_that_threads_frames(tmp_path: Path) -> None:
    script = tmp_path / "crashes.py"
    script.write_text(
        "import ctypes, threading, time\n"
        "def boom():\n"
        "    ctypes.string_at(0)\n"
        "threading.Thread(target=boom).start()\n"
        "time.sleep(30)\n"
    )
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(script)], capture_output=True, text=True
    )
    assert out.returncode == -11
    c = crash.parse(out.stderr)
    assert c is not None and c.phase is None and not c.in_tensorflow
    assert [f.function for f in c.frames[:2]] == ["string_at", "boom"]
    assert c.own_frame is not None and str(c.own_frame) == "boom (crashes.py:3)"
    assert crash.parse("no dump here\n") is None
